// The aah.* run-config keys read into AahOptions.
#include "worker/methods/aah/aah_config.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace headlab::aah {
namespace {

constexpr Regime kRegimes[] = {Regime::kOff, Regime::kFull, Regime::kGroupingOff,
                               Regime::kFullAdaptive, Regime::kShallowFreeze,
                               Regime::kDeepReuse};
constexpr Control kControls[] = {
    Control::kNone,          Control::kControlOff,         Control::kFixedRandomGrouping,
    Control::kFreezeAfterWarmup, Control::kIndependentScoring, Control::kNoParentConstraint,
    Control::kNoFeatureEma,  Control::kFixedWindow,        Control::kRandomWindow,
    Control::kShufflePostSelect};
constexpr ResolutionState kResolutionStates[] = {ResolutionState::kRounded,
                                                 ResolutionState::kRunning};

template <typename E, size_t N, typename NameFn>
StatusOr<E> ParseName(const std::string& s, const E (&all)[N], NameFn name, const char* what) {
  std::string known;
  for (E e : all) {
    if (s == name(e)) return e;
    known += (known.empty() ? "" : ", ") + std::string("\"") + name(e) + "\"";
  }
  return Status::InvalidArgument(std::string("unknown ") + what + " \"" + s + "\" (known: " +
                                 known + ")");
}

// "2,2,2,2" -> {2,2,2,2}; "" -> {}. Items must be integers >= 1.
StatusOr<std::vector<int64_t>> ParseIntList(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    std::string t = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    char* end = nullptr;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || v < 1)
      return Status::InvalidArgument("expected a comma-separated list of positive integers, got \"" +
                                     s + "\"");
    out.push_back(int64_t(v));
  }
  return out;
}

}  // namespace

const char* RegimeName(Regime r) {
  switch (r) {
    case Regime::kOff: return "off";
    case Regime::kFull: return "full";
    case Regime::kGroupingOff: return "grouping_off";
    case Regime::kFullAdaptive: return "full_adaptive";
    case Regime::kShallowFreeze: return "shallow_freeze";
    case Regime::kDeepReuse: return "deep_reuse";
  }
  return "?";
}

const char* ControlName(Control c) {
  switch (c) {
    case Control::kNone: return "none";
    case Control::kControlOff: return "control_off";
    case Control::kFixedRandomGrouping: return "fixed_random_grouping";
    case Control::kFreezeAfterWarmup: return "freeze_after_warmup";
    case Control::kIndependentScoring: return "independent_scoring";
    case Control::kNoParentConstraint: return "no_parent_constraint";
    case Control::kNoFeatureEma: return "no_feature_ema";
    case Control::kFixedWindow: return "fixed_window";
    case Control::kRandomWindow: return "random_window";
    case Control::kShufflePostSelect: return "shuffle_post_select";
  }
  return "?";
}

const char* ResolutionStateName(ResolutionState s) {
  return s == ResolutionState::kRunning ? "running" : "rounded";
}

StatusOr<Regime> ParseRegime(const std::string& s) {
  return ParseName(s, kRegimes, RegimeName, "aah regime");
}
StatusOr<Control> ParseControl(const std::string& s) {
  return ParseName(s, kControls, ControlName, "aah control");
}
StatusOr<ResolutionState> ParseResolutionState(const std::string& s) {
  return ParseName(s, kResolutionStates, ResolutionStateName, "aah resolution state");
}

std::vector<int64_t> ScaledWindows(int64_t context) {
  // AAH §5.2: W = [512, 1024, 2048, 4096] at T = 4096, i.e. T/8, T/4, T/2, T.
  std::vector<int64_t> w;
  for (int64_t div : {8, 4, 2, 1}) {
    int64_t v = std::max<int64_t>(1, context / div);
    if (w.empty() || v > w.back()) w.push_back(v);
  }
  return w;
}

std::vector<int64_t> DefaultHierarchy(Regime r) {
  switch (r) {
    case Regime::kShallowFreeze: return {2};
    case Regime::kFullAdaptive:
    case Regime::kDeepReuse: return {2, 2, 2, 2};
    default: return {};
  }
}

Status ValidateOptions(const AahOptions& o) {
  auto bad = [](const std::string& key, const std::string& what) {
    return Status::InvalidArgument("aah." + key + ": " + what);
  };
  if (o.regime == Regime::kOff) return Status::Ok();
  if (o.context < 1) return bad("windows", "needs model.context >= 1");
  if (o.windows.empty()) return bad("windows", "expected at least one candidate window");
  for (size_t i = 0; i < o.windows.size(); ++i) {
    if (o.windows[i] < 1 || o.windows[i] > o.context)
      return bad("windows", "expected windows in [1, model.context = " +
                                std::to_string(o.context) + "], got " + std::to_string(o.windows[i]));
    if (i > 0 && o.windows[i] <= o.windows[i - 1])
      return bad("windows", "expected strictly increasing windows (AAH §5.7 orders W by span)");
  }
  if (o.min_window < 1 || o.min_window > o.context)
    return bad("min_window", "expected W_min in [1, model.context]");
  if (o.control_every < 1) return bad("control_every", "expected >= 1");
  if (!(o.feature_ema >= 0 && o.feature_ema < 1)) return bad("feature_ema", "expected alpha in [0, 1)");
  if (!(o.resolution_ema >= 0 && o.resolution_ema < 1))
    return bad("resolution_ema", "expected beta in [0, 1)");
  if (!(o.norm_penalty >= 0)) return bad("norm_penalty", "expected lambda >= 0");
  if (!(o.cluster_threshold >= -1 && o.cluster_threshold <= 1))
    return bad("cluster_threshold", "expected a cosine in [-1, 1]");
  if (o.scorer_hidden < 1) return bad("scorer_hidden", "expected >= 1");
  if (o.control == Control::kFixedWindow && (o.fixed_window < 1 || o.fixed_window > o.context))
    return bad("fixed_window", "expected a window in [1, model.context]");
  if (o.observe_rows < 0) return bad("observe_rows", "expected >= 0");
  if (o.cache_step < -1) return bad("cache_step", "expected -1 (automatic) or a step >= 0");
  for (int64_t b : o.hierarchy)
    if (b < 2) return bad("hierarchy", "expected branching factors >= 2");
  const bool hier = o.regime == Regime::kFullAdaptive || o.regime == Regime::kShallowFreeze ||
                    o.regime == Regime::kDeepReuse;
  if (hier && o.hierarchy.empty()) return bad("hierarchy", "expected a shape such as \"2,2,2,2\"");
  if (!hier && (o.control == Control::kFixedRandomGrouping ||
                o.control == Control::kIndependentScoring ||
                o.control == Control::kNoParentConstraint))
    return bad("control", std::string("\"") + ControlName(o.control) +
                              "\" needs a hierarchy regime (full_adaptive, shallow_freeze, deep_reuse)");
  if (o.regime == Regime::kFull && o.control != Control::kNone)
    return bad("control", "the full regime takes no control");
  return Status::Ok();
}

StatusOr<AahOptions> AahOptionsFromJson(const Json& config, int64_t context,
                                        int64_t warmup_steps, const std::string& file) {
  // Keys may come nested ({"aah": {"regime": ...}}) or dotted at the top level.
  Json a = Json::object();
  if (auto it = config.find("aah"); it != config.end() && it->is_object()) a = *it;
  for (auto it = config.begin(); it != config.end(); ++it)
    if (it.key().rfind("aah.", 0) == 0) a[it.key().substr(4)] = it.value();

  AahOptions o;
  o.context = context;
  std::string key;
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(file + ": $.config.aah." + key + ": " + what);
  };
  try {
    key = "regime";
    auto regime = ParseRegime(a.value("regime", std::string("off")));
    if (!regime.ok()) return bad(regime.status().message());
    o.regime = regime.value();
    if (o.regime == Regime::kOff) return o;
    key = "control";
    auto control = ParseControl(a.value("control", std::string("none")));
    if (!control.ok()) return bad(control.status().message());
    o.control = control.value();
    key = "hierarchy";
    std::string shape = a.value("hierarchy", std::string());
    if (shape.empty()) {
      o.hierarchy = DefaultHierarchy(o.regime);
    } else {
      auto h = ParseIntList(shape);
      if (!h.ok()) return bad(h.status().message());
      o.hierarchy = h.value();
    }
    key = "windows";
    std::string windows = a.value("windows", std::string());
    if (windows.empty()) {
      o.windows = ScaledWindows(context);
    } else {
      auto w = ParseIntList(windows);
      if (!w.ok()) return bad(w.status().message());
      o.windows = w.value();
    }
    key = "min_window";
    o.min_window = a.value("min_window", int64_t(0));
    if (o.min_window == 0 && !o.windows.empty()) o.min_window = o.windows.front();
    // Plain numeric keys keep the paper's default when absent.
    auto read = [&](const char* name, auto* field) {
      key = name;
      *field = a.value(name, *field);
    };
    read("control_every", &o.control_every);
    read("feature_ema", &o.feature_ema);
    read("resolution_ema", &o.resolution_ema);
    read("norm_penalty", &o.norm_penalty);
    read("cluster_threshold", &o.cluster_threshold);
    read("scorer_hidden", &o.scorer_hidden);
    read("observe_rows", &o.observe_rows);
    key = "fixed_window";
    o.fixed_window = a.value("fixed_window", int64_t(0));
    // fixed-1024 at T = 4096 (§7.3): the second candidate of the scaled set.
    if (o.fixed_window == 0) o.fixed_window = o.windows.size() > 1 ? o.windows[1] : o.windows[0];
    key = "resolution_state";
    auto state = ParseResolutionState(a.value("resolution_state", std::string("rounded")));
    if (!state.ok()) return bad(state.status().message());
    o.resolution_state = state.value();
    read("cache_step", &o.cache_step);
    key = "freeze_step";
    o.freeze_step = a.value("freeze_step", int64_t(-1));
    if (o.freeze_step < 0) o.freeze_step = warmup_steps;
  } catch (const Json::exception& e) {
    return bad(std::string("wrong type (") + e.what() + ")");
  }
  key.clear();
  Status s = ValidateOptions(o);
  if (!s.ok()) return Status::InvalidArgument(file + ": $.config." + s.message());
  return o;
}

}  // namespace headlab::aah
