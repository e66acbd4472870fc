// SAF method options: names of patterns and schedules, and the typed `saf` config section.
#include "worker/methods/saf/saf_options.h"

#include <functional>
#include <map>
#include <vector>

namespace headlab::saf {
namespace {

constexpr const char* kPatternNames[] = {"mean", "sharp_mean", "gaussian", "dirichlet",
                                         "structured_random"};
constexpr const char* kScheduleNames[] = {"one_time", "gradual", "validation_budget",
                                          "train_loss"};

template <class E, size_t N>
StatusOr<E> ParseName(const char* const (&names)[N], const std::string& what,
                      const std::string& name) {
  std::string known;
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return E(i);
    known += (i ? ", " : "") + std::string(names[i]);
  }
  return Status::InvalidArgument("unknown SAF " + what + " \"" + name + "\" (known: " + known + ")");
}

}  // namespace

const char* PatternKindName(PatternKind k) { return kPatternNames[int(k)]; }
StatusOr<PatternKind> ParsePatternKind(const std::string& name) {
  return ParseName<PatternKind>(kPatternNames, "pattern", name);
}
const char* ScheduleKindName(ScheduleKind k) { return kScheduleNames[int(k)]; }
StatusOr<ScheduleKind> ParseScheduleKind(const std::string& name) {
  return ParseName<ScheduleKind>(kScheduleNames, "schedule", name);
}

uint64_t DrawSeed(const Json& config, int64_t seed) {
  int64_t parent = 0;
  if (config.is_object() && config.contains("parent") && config["parent"].is_object())
    parent = config["parent"].value("run", int64_t(0));
  if (parent == 0) return uint64_t(seed);
  // SplitMix64 of (seed, parent): distinct parents give unrelated generator states.
  uint64_t x = uint64_t(seed) * 0x9E3779B97F4A7C15ULL + uint64_t(parent);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

StatusOr<SafOptions> SafOptionsFromJson(const Json& config, const std::string& file) {
  SafOptions o;
  if (!config.is_object() || !config.contains("saf")) return o;
  const Json& s = config["saf"];
  if (!s.is_object()) return Status::InvalidArgument(file + ": $.saf: expected an object");

  // One reader per key: (JSON value, path) -> Status.
  using Reader = std::function<Status(const Json&, const std::string&)>;
  auto bad = [&](const std::string& path, const std::string& what, const Json& v) {
    return Status::InvalidArgument(file + ": " + path + ": expected " + what + ", got " + v.dump());
  };
  auto number = [&](double* out, double lo, double hi) -> Reader {
    return [=](const Json& v, const std::string& path) {
      if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi)
        return bad(path, "a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", v);
      *out = v.get<double>();
      return Status::Ok();
    };
  };
  auto integer = [&](int64_t* out, int64_t lo, int64_t hi) -> Reader {
    return [=](const Json& v, const std::string& path) {
      if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
        return bad(path, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", v);
      *out = v.get<int64_t>();
      return Status::Ok();
    };
  };
  auto boolean = [&](bool* out) -> Reader {
    return [=](const Json& v, const std::string& path) {
      if (v.is_boolean()) *out = v.get<bool>();
      else if (v.is_number_integer() && (v == 0 || v == 1)) *out = v.get<int64_t>() == 1;
      else return bad(path, "a boolean (or 0/1)", v);
      return Status::Ok();
    };
  };
  auto string = [&](std::string* out, const std::vector<std::string>& allowed) -> Reader {
    return [=](const Json& v, const std::string& path) {
      if (!v.is_string()) return bad(path, "a string", v);
      std::string x = v.get<std::string>();
      bool ok = allowed.empty();
      for (const auto& a : allowed) ok = ok || a == x;
      if (!ok) return bad(path, "one of the allowed names", v);
      *out = x;
      return Status::Ok();
    };
  };
  auto parsed = [&](auto* out, auto parse) -> Reader {
    return [=](const Json& v, const std::string& path) {
      if (!v.is_string()) return bad(path, "a string", v);
      auto r = parse(v.get<std::string>());
      if (!r.ok()) return Status::InvalidArgument(file + ": " + path + ": " + r.status().message());
      *out = *r;
      return Status::Ok();
    };
  };
  const std::map<std::string, Reader> readers = {
      {"method", string(&o.method, {"none", "replace", "prune"})},
      {"rate", number(&o.rate, 0, 1)},
      {"score", parsed(&o.score, ParseScoreKind)},
      {"pattern", parsed(&o.pattern, ParsePatternKind)},
      {"storage", string(&o.storage, {"compact", "dense"})},
      {"schedule", parsed(&o.schedule, ParseScheduleKind)},
      {"tau", number(&o.tau, 0, 1)},
      {"tau_start", number(&o.tau_start, 0, 1)},
      {"tau_end", number(&o.tau_end, 0, 1)},
      {"groups", integer(&o.groups, 1, 1000)},
      {"calib_sequences", integer(&o.calib_sequences, 2, 1000000)},
      {"calib_batch", integer(&o.calib_batch, 1, 65536)},
      {"calib_split", string(&o.calib_split, {"train", "calib", "val"})},
      {"output_sequences", integer(&o.output_sequences, 1, 1000000)},
      {"output_queries", integer(&o.output_queries, 1, 1000000)},
      {"fit_steps", integer(&o.fit_steps, 0, 1000000)},
      {"fit_lr", number(&o.fit_lr, 1e-12, 10)},
      {"fit_max_kl", number(&o.fit_max_kl, 0, 1e9)},
      {"fit_path", string(&o.fit_path, {"fft", "dense"})},
      {"heads", string(&o.heads, {})},
      {"dirichlet_scale", number(&o.dirichlet_scale, 1e-9, 1e9)},
      {"trainable", boolean(&o.trainable)},
      {"budget", number(&o.budget, 0, 100)},
      {"group_heads", integer(&o.group_heads, 0, 1000000)},
      {"check_every", integer(&o.check_every, 0, 100000000)},
      {"z", number(&o.z, 0, 100)},
      {"window", integer(&o.window, 0, 100000000)},
      {"pattern_seed", integer(&o.pattern_seed, 0, int64_t(1) << 53)},
      {"selection_seed", integer(&o.selection_seed, -1, int64_t(1) << 53)},
  };
  for (auto it = s.begin(); it != s.end(); ++it) {
    auto r = readers.find(it.key());
    std::string path = "$.saf." + it.key();
    if (r == readers.end()) {
      std::string known;
      for (const auto& [k, _] : readers) known += (known.empty() ? "" : ", ") + k;
      return Status::InvalidArgument(file + ": " + path + ": unknown key (known: " + known + ")");
    }
    HEADLAB_RETURN_IF_ERROR(r->second(it.value(), path));
  }
  if (o.storage == "dense" && o.pattern == PatternKind::kStructuredRandom)
    return Status::InvalidArgument(file + ": $.saf.storage: structured_random is compact only");
  if (o.tau_start > o.tau_end)
    return Status::InvalidArgument(file + ": $.saf.tau_start: expected <= saf.tau_end");
  return o;
}

}  // namespace headlab::saf
