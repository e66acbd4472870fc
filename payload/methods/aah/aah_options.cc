// The aah.* run-config keys read into AahOptions.
#include "payload/methods/aah/aah_options.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "common/config_key.h"
#include "payload/methods/aah/aah_schema.h"

namespace headlab::aah {
namespace {

static_assert(std::size(kRegimeNames) == size_t(Regime::kDeepReuse) + 1);
static_assert(std::size(kControlNames) == size_t(Control::kShufflePostSelect) + 1);
static_assert(std::size(kResolutionStateNames) == size_t(ResolutionState::kRunning) + 1);

}  // namespace

const char* RegimeName(Regime r) { return kRegimeNames[int(r)]; }
const char* ControlName(Control c) { return kControlNames[int(c)]; }
const char* ResolutionStateName(ResolutionState s) { return kResolutionStateNames[int(s)]; }

StatusOr<Regime> ParseRegime(const std::string& s) {
  return ParseNamed<Regime>(kRegimeNames, s, "aah regime");
}
StatusOr<Control> ParseControl(const std::string& s) {
  return ParseNamed<Control>(kControlNames, s, "aah control");
}
StatusOr<ResolutionState> ParseResolutionState(const std::string& s) {
  return ParseNamed<ResolutionState>(kResolutionStateNames, s, "aah resolution state");
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
    case Regime::kShallowFreeze:
      return {2};
    case Regime::kFullAdaptive:
    case Regime::kDeepReuse:
      return {2, 2, 2, 2};
    default:
      return {};
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
      return bad("windows", "expected windows in [1, model.context = " + std::to_string(o.context) +
                                "], got " + std::to_string(o.windows[i]));
    if (i > 0 && o.windows[i] <= o.windows[i - 1])
      return bad("windows", "expected strictly increasing windows (AAH §5.7 orders W by span)");
  }
  if (o.min_window < 1 || o.min_window > o.context)
    return bad("min_window", "expected W_min in [1, model.context]");
  if (o.control == Control::kFixedWindow && (o.fixed_window < 1 || o.fixed_window > o.context))
    return bad("fixed_window", "expected a window in [1, model.context]");
  for (int64_t b : o.hierarchy)
    if (b < 2) return bad("hierarchy", "expected branching factors >= 2");
  const bool hier = o.regime == Regime::kFullAdaptive || o.regime == Regime::kShallowFreeze ||
                    o.regime == Regime::kDeepReuse;
  if (hier && o.hierarchy.empty()) return bad("hierarchy", "expected a shape such as \"2,2,2,2\"");
  if (!hier &&
      (o.control == Control::kFixedRandomGrouping || o.control == Control::kIndependentScoring ||
       o.control == Control::kNoParentConstraint))
    return bad("control",
               std::string("\"") + ControlName(o.control) +
                   "\" needs a hierarchy regime (full_adaptive, shallow_freeze, deep_reuse)");
  if (o.regime == Regime::kFull && o.control != Control::kNone)
    return bad("control", "the full regime takes no control");
  return Status::Ok();
}

StatusOr<AahOptions> AahOptionsFromJson(const Json& config, int64_t context, int64_t warmup_steps,
                                        const std::string& file) {
  // The values were validated against aah_schema.cc by NormalizeRunConfig; here the lists
  // are parsed, the run-dependent defaults filled and the fields checked against each other.
  AahOptions o;
  o.context = context;
  std::string key;
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(file + ": $.config.aah." + key + ": " + what);
  };
  try {
    const Json& a = config.at("aah");
    o.regime = SchemaChecked(ParseRegime(a.at("regime").get<std::string>()));
    if (o.regime == Regime::kOff) return o;
    o.control = SchemaChecked(ParseControl(a.at("control").get<std::string>()));
    o.resolution_state =
        SchemaChecked(ParseResolutionState(a.at("resolution_state").get<std::string>()));
    o.control_every = a.at("control_every").get<int64_t>();
    o.feature_ema = a.at("feature_ema").get<double>();
    o.resolution_ema = a.at("resolution_ema").get<double>();
    o.norm_penalty = a.at("norm_penalty").get<double>();
    o.cluster_threshold = a.at("cluster_threshold").get<double>();
    o.scorer_hidden = a.at("scorer_hidden").get<int64_t>();
    o.observe_rows = a.at("observe_rows").get<int64_t>();
    o.cache_step = a.at("cache_step").get<int64_t>();
    key = "hierarchy";
    const std::string shape = a.at("hierarchy").get<std::string>();
    if (shape.empty()) {
      o.hierarchy = DefaultHierarchy(o.regime);
    } else {
      auto h = ParsePositiveIntList(shape);
      if (!h.ok()) return bad(h.status().message());
      o.hierarchy = h.value();
    }
    key = "windows";
    const std::string windows = a.at("windows").get<std::string>();
    if (windows.empty()) {
      o.windows = ScaledWindows(context);
    } else {
      auto w = ParsePositiveIntList(windows);
      if (!w.ok()) return bad(w.status().message());
      o.windows = w.value();
    }
    o.min_window = a.at("min_window").get<int64_t>();
    if (o.min_window == 0 && !o.windows.empty()) o.min_window = o.windows.front();
    o.fixed_window = a.at("fixed_window").get<int64_t>();
    // fixed-1024 at T = 4096 (§7.3): the second candidate of the scaled set.
    if (o.fixed_window == 0 && !o.windows.empty())
      o.fixed_window = o.windows.size() > 1 ? o.windows[1] : o.windows[0];
    o.freeze_step = a.at("freeze_step").get<int64_t>();
    if (o.freeze_step < 0) o.freeze_step = warmup_steps;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(file + ": $.config.aah: expected a normalised run config (" +
                                   e.what() + ")");
  }
  key.clear();
  Status s = ValidateOptions(o);
  if (!s.ok()) return Status::InvalidArgument(file + ": $.config." + s.message());
  return o;
}

}  // namespace headlab::aah
