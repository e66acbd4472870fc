// Grid parsing, validation and expansion (schema/grid.md). Every check names the file, the
// JSON path and what was expected; nothing is expanded until the whole grid is valid.
#include "common/grid.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "common/error_list.h"
#include "common/metric_catalog.h"
#include "common/run_config.h"
#include "common/search.h"
#include "common/sha256.h"
#include "common/suggest.h"
#include "common/utf8.h"

namespace headlab {

namespace {

// A grid may not expand to more runs than this: a typo such as a 1000-value axis times
// another must fail fast rather than allocate millions of configs.
constexpr size_t kMaxRuns = 100000;
// The most config text a grid may expand to (CheckExpandedBytes). Expanded configs are
// JSON trees, about 7 times their text in memory (25,000 no-op runs, 2,752 bytes of
// config text each, peaked at 509 MB of coordinator RSS; 100,000 at 2 GB): at this bound
// one expansion (the coordinator runs one at a time) stays under 500 MB, below its RSS
// ceiling (docs/BENCHMARKS.md, "Service under attack"); about 24,000 no-op runs.
constexpr size_t kMaxExpandedBytes = size_t(64) << 20;
constexpr int kMinAttempts = 1;
constexpr int kMaxAttempts = 20;

Status Invalid(const std::string& file, const std::string& path, const std::string& what) {
  return Status::InvalidArgument(file + ": " + path + ": " + what);
}

std::string Got(const Json& v) {
  return ShortenForMessage(v.dump(), 60);  // never splits a UTF-8 sequence
}

// Returns true iff `s` matches [A-Za-z0-9_.-]{1,64}: grid, arm and comparison names.
bool IsName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

// Every key of `obj` that is not `known`, each with the closest known one.
Status CheckKnownKeys(const Json& obj, const std::string& file, const std::string& path,
                      const std::vector<std::string>& known) {
  ErrorList errors;
  for (auto& [key, value] : obj.items()) {
    bool found = false;
    for (const auto& k : known) found = found || k == key;
    if (found) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    std::string guess = ClosestName(key, known);
    errors.Add(Invalid(file, path + "." + key,
                       "unknown key" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") +
                           " (known: " + list + ")"));
  }
  return errors.ToStatus();
}

StatusOr<std::string> RequiredString(const Json& obj, const std::string& key,
                                     const std::string& file, const std::string& path,
                                     const std::string& expected) {
  auto it = obj.find(key);
  if (it == obj.end()) return Invalid(file, path + "." + key, "required: " + expected);
  if (!it->is_string())
    return Invalid(file, path + "." + key, "expected " + expected + ", got " + Got(*it));
  return it->get<std::string>();
}

// Parses one --set value: a JSON number, bool or string literal, else the raw text.
Json ParseSetValue(const std::string& text) {
  auto j = ParseJson(text, "--set");
  if (j.ok() && (j->is_number() || j->is_boolean() || j->is_string())) return j.value();
  return Json(text);
}

// The values of "KEY=V1,V2" (split at commas, each item also kept as written) or
// "KEY=[V1, V2]" (a JSON list: a value may then hold commas, as head lists do).
struct SetItems {
  Json values = Json::array();
  std::vector<std::string> written;  // the comma form's items as typed; empty for a list
};
StatusOr<SetItems> SetValues(const std::string& rest, const std::string& file,
                             const std::string& where) {
  SetItems out;
  if (!rest.empty() && rest.front() == '[') {
    auto list = ParseJson(rest, where);
    if (!list.ok() || !list->is_array() || list->empty())
      return Invalid(file, where,
                     "expected a non-empty JSON list of values after '=', such as "
                     "[\"0.0=local:16,1.*=pruned\", \"*.*=streaming:4:16\"]" +
                         (list.ok() ? std::string() : ": " + list.status().message()));
    for (const Json& v : *list) out.values.push_back(v);
    return out;
  }
  size_t start = 0;
  while (true) {
    size_t comma = rest.find(',', start);
    out.written.push_back(rest.substr(start, comma == std::string::npos ? comma : comma - start));
    out.values.push_back(ParseSetValue(out.written.back()));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Applies "key=v1,v2" or "key=[v1, v2]" to root["axes"]; values are validated against the
// schema here so the error names the --set argument rather than a path the user never
// wrote. `earlier` holds the --set arguments applied before, by key: a key given twice is
// refused rather than the first silently dropped.
Status ApplySet(const std::string& set, const std::string& file,
                std::map<std::string, std::string>* earlier, Json* root) {
  std::string where = "--set \"" + set + "\"";
  size_t eq = set.find('=');
  if (eq == std::string::npos || eq == 0)
    return Invalid(file, where, "expected KEY=V1,V2,... or KEY=[V1, V2, ...]");
  std::string key = set.substr(0, eq);
  if (!IsRunConfigKey(key)) return UnknownRunConfigKey(file, where, key);
  auto [prev, fresh] = earlier->emplace(key, set);
  if (!fresh)
    return Invalid(file, where,
                   key + " is already set by --set \"" + prev->second +
                       "\"; give every value in one: --set " + key + "=V1,V2");
  std::string rest = set.substr(eq + 1);
  if (rest.empty()) return Invalid(file, where, "empty axis");
  auto items = SetValues(rest, file, where);
  if (!items.ok()) return items.status();
  Json& values = items->values;
  ErrorList errors;
  std::set<std::string> seen;
  for (size_t i = 0; i < values.size(); ++i) {
    auto checked = ValidateRunConfigValue(key, values[i], file, where);
    // A string key takes what was typed as text: saf.heads=0.2 is the head "0.2", not
    // the number 0.2.
    if (!checked.ok() && !values[i].is_string() && i < items->written.size()) {
      auto text = ValidateRunConfigValue(key, Json(items->written[i]), file, where);
      if (text.ok()) {
        values[i] = Json(items->written[i]);
        checked = text;
      }
    }
    if (!errors.Add(checked.status())) continue;
    if (!seen.insert(checked->dump()).second)
      errors.Add(
          Invalid(file, where, "duplicate value " + Got(values[i]) + " (runs would repeat)"));
  }
  HEADLAB_RETURN_IF_ERROR(errors.ToStatus());
  if (!root->contains("axes")) (*root)["axes"] = Json::object();
  if ((*root)["axes"].is_object()) (*root)["axes"][key] = std::move(values);
  return Status::Ok();
}

struct Axis {
  std::string key;
  std::vector<Json> values;  // canonical (validated) values
};

StatusOr<std::vector<Axis>> ParseAxes(const Json& root, const std::string& file) {
  std::vector<Axis> axes;
  auto it = root.find("axes");
  if (it == root.end()) return axes;
  if (!it->is_object())
    return Invalid(file, "$.axes",
                   "expected an object of config key -> list of values, got " + Got(*it));
  ErrorList errors;
  for (auto& [key, list] : it->items()) {  // std::map order: lexicographic keys
    std::string path = "$.axes." + key;
    if (!IsRunConfigKey(key)) {
      errors.Add(UnknownRunConfigKey(file, path, key));
      continue;
    }
    if (!list.is_array()) {
      errors.Add(Invalid(file, path, "expected a non-empty list of values, got " + Got(list)));
      continue;
    }
    if (list.empty()) {
      errors.Add(Invalid(file, path, "empty axis"));
      continue;
    }
    Axis axis{key, {}};
    std::set<std::string> seen;
    for (size_t i = 0; i < list.size(); ++i) {
      std::string vpath = path + "[" + std::to_string(i) + "]";
      auto v = ValidateRunConfigValue(key, list[i], file, vpath);
      if (!errors.Add(v.status())) continue;
      if (!seen.insert(v->dump()).second) {
        errors.Add(
            Invalid(file, vpath, "duplicate value " + Got(list[i]) + " (runs would repeat)"));
        continue;
      }
      axis.values.push_back(std::move(v.value()));
    }
    axes.push_back(std::move(axis));
  }
  HEADLAB_RETURN_IF_ERROR(errors.ToStatus());
  return axes;
}

// Returns arm -> flattened overrides, in lexicographic arm order.
StatusOr<std::map<std::string, Json>> ParseArms(const Json& root, const std::string& file) {
  std::map<std::string, Json> arms;
  auto it = root.find("arms");
  if (it == root.end()) {
    arms["main"] = Json::object();
    return arms;
  }
  if (!it->is_object())
    return Invalid(file, "$.arms", "expected an object of arm name -> overrides, got " + Got(*it));
  if (it->empty()) return Invalid(file, "$.arms", "expected at least one arm, got {}");
  ErrorList errors;
  for (auto& [name, overrides] : it->items()) {
    std::string path = "$.arms." + name;
    if (!IsName(name))
      errors.Add(Invalid(file, path, "expected an arm name matching [A-Za-z0-9_.-]{1,64}"));
    auto flat = FlattenRunConfig(overrides, file, path);
    if (errors.Add(flat.status())) arms[name] = std::move(flat.value());
  }
  HEADLAB_RETURN_IF_ERROR(errors.ToStatus());
  return arms;
}

StatusOr<std::vector<std::string>> ParsePairBy(const Json& root, const std::string& file) {
  auto it = root.find("pair_by");
  if (it == root.end()) return std::vector<std::string>{"seed"};
  if (!it->is_array())
    return Invalid(file, "$.pair_by", "expected a list of config keys, got " + Got(*it));
  std::vector<std::string> keys;
  for (size_t i = 0; i < it->size(); ++i) {
    std::string path = "$.pair_by[" + std::to_string(i) + "]";
    const Json& k = (*it)[i];
    if (!k.is_string())
      return Invalid(file, path, "expected a config key such as \"seed\", got " + Got(k));
    if (!IsRunConfigKey(k.get<std::string>()))
      return UnknownRunConfigKey(file, path, k.get<std::string>());
    for (const auto& prev : keys)
      if (prev == k.get<std::string>()) return Invalid(file, path, "duplicate key " + Got(k));
    keys.push_back(k.get<std::string>());
  }
  return keys;
}

StatusOr<std::vector<Comparison>> ParseComparisons(const Json& root, const std::string& file,
                                                   const std::map<std::string, Json>& arms) {
  std::vector<Comparison> out;
  auto it = root.find("comparisons");
  if (it == root.end()) return out;
  if (!it->is_array())
    return Invalid(file, "$.comparisons", "expected a list of comparisons, got " + Got(*it));
  std::set<std::string> names;
  for (size_t i = 0; i < it->size(); ++i) {
    std::string path = "$.comparisons[" + std::to_string(i) + "]";
    const Json& c = (*it)[i];
    if (!c.is_object())
      return Invalid(file, path,
                     "expected an object {name, baseline, treatment, metric, "
                     "stat}, got " +
                         Got(c));
    HEADLAB_RETURN_IF_ERROR(
        CheckKnownKeys(c, file, path, {"name", "baseline", "treatment", "metric", "stat"}));
    Comparison cmp;
    std::string* fields[] = {&cmp.name, &cmp.baseline, &cmp.treatment, &cmp.metric, &cmp.stat};
    const char* keys[] = {"name", "baseline", "treatment", "metric", "stat"};
    const char* expected[] = {"a non-empty string", "an arm name", "an arm name",
                              "a metric name such as \"eval.ppl\"",
                              "one of \"delta_pct\", \"diff\", \"ratio\""};
    for (int f = 0; f < 5; ++f) {
      auto v = RequiredString(c, keys[f], file, path, expected[f]);
      if (!v.ok()) return v.status();
      *fields[f] = v.value();
    }
    if (cmp.name.empty() || cmp.name.size() > 200)
      return Invalid(file, path + ".name", "expected a non-empty string of at most 200 bytes");
    if (!names.insert(cmp.name).second)
      return Invalid(file, path + ".name", "duplicate comparison name " + Got(cmp.name));
    for (const auto& [field, arm] : {std::pair<const char*, std::string>{"baseline", cmp.baseline},
                                     {"treatment", cmp.treatment}}) {
      if (arms.count(arm)) continue;
      std::string list;
      for (const auto& [a, o] : arms) list += (list.empty() ? "" : ", ") + a;
      return Invalid(file, path + "." + field, "unknown arm " + Got(arm) + " (arms: " + list + ")");
    }
    if (cmp.baseline == cmp.treatment)
      return Invalid(file, path + ".treatment",
                     "expected an arm other than the baseline, got " + Got(cmp.treatment));
    if (!IsName(cmp.metric))
      return Invalid(file, path + ".metric",
                     "expected a metric name such as \"eval.ppl\", got " + Got(cmp.metric));
    // speedup = baseline / treatment per pair (SAF App. C.4: t_ord / t_rep).
    if (cmp.stat != "delta_pct" && cmp.stat != "diff" && cmp.stat != "ratio" &&
        cmp.stat != "speedup")
      return Invalid(
          file, path + ".stat",
          "expected one of \"delta_pct\", \"diff\", \"ratio\", \"speedup\", got " + Got(cmp.stat));
    out.push_back(std::move(cmp));
  }
  return out;
}

// A comparison's metric must be one some run of its arms can report: for built-in run
// kinds a name of the metric catalog (metric_catalog.h); a command run's program names
// its own metrics, so a grid with one accepts any well-formed name.
Status CheckComparisonMetrics(const Grid& grid, const std::string& file) {
  for (const ExpandedRun& r : grid.runs)
    if (r.config.value("kind", "") == "command") return Status::Ok();
  for (size_t i = 0; i < grid.comparisons.size(); ++i) {
    const std::string& m = grid.comparisons[i].metric;
    if (IsBuiltinMetric(m)) continue;
    std::string section = m.substr(0, m.find('.')), same;
    for (const std::string& k : BuiltinMetricNames())
      if (k.compare(0, section.size() + 1, section + ".") == 0 && k.back() != '.')
        same += (same.empty() ? "" : ", ") + k;
    std::string guess = ClosestName(m, BuiltinMetricNames());
    return Invalid(file, "$.comparisons[" + std::to_string(i) + "].metric",
                   "no run kind of this grid reports " + Got(m) +
                       (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") +
                       (same.empty() ? "" : " (" + section + " metrics: " + same + ")") +
                       "; the names are in common/metric_names.h and "
                       "payload/methods/*/*_metrics.h");
  }
  return Status::Ok();
}

// A short description of one run's axis values for cross-field error messages.
std::string RunLabel(int index, const std::string& arm, const std::vector<Axis>& axes,
                     const std::vector<size_t>& pos) {
  std::string s = "run " + std::to_string(index) + " (arm \"" + arm + "\"";
  for (size_t a = 0; a < axes.size(); ++a)
    s += ", " + axes[a].key + "=" + axes[a].values[pos[a]].dump();
  return s + ")";
}

// Refuses, before expanding, a grid whose runs' configs would together exceed
// kMaxExpandedBytes: each run holds the base with every default filled in (a complete
// config is about 2.7 KB even for a no-op run) plus, at most, the longest value of every
// axis and the largest arm's overrides, so their sum bounds what expansion builds (every
// key is within its own limits, yet 100 keys of 4,000 bytes over 2,000 seeds are 800 MB).
Status CheckExpandedBytes(const Json& base, const std::vector<Axis>& axes,
                          const std::map<std::string, Json>& arms, size_t runs,
                          const std::string& file) {
  // The defaults' share: the first run's complete config (an invalid one is reported by
  // the expansion, which builds it again).
  Json first = base;
  for (const Axis& a : axes)
    if (!a.values.empty()) first[a.key] = a.values.front();
  auto built = BuildRunConfig(first, file, "$");
  size_t per_run = std::max(base.dump().size(), built.ok() ? built->dump().size() : 0);
  for (const Axis& a : axes) {
    size_t longest = 0;
    for (const Json& v : a.values) longest = std::max(longest, v.dump().size());
    per_run += a.key.size() + longest + 4;
  }
  size_t largest_arm = 0;
  for (const auto& [arm, overrides] : arms)
    largest_arm = std::max(largest_arm, overrides.dump().size());
  per_run += largest_arm;
  if (per_run > kMaxExpandedBytes / std::max<size_t>(runs, 1))
    return Invalid(file, "$",
                   "the grid's " + std::to_string(runs) + " runs of up to " +
                       std::to_string(per_run) + " bytes each would expand to more than " +
                       std::to_string(kMaxExpandedBytes >> 20) +
                       " MiB of configs; use fewer runs or shorter values");
  return Status::Ok();
}

}  // namespace

std::vector<std::string> StrataKeys(const Json& source, const std::vector<std::string>& pair_by) {
  std::vector<std::string> keys;
  auto add = [&](const std::string& key) {
    if (std::find(pair_by.begin(), pair_by.end(), key) == pair_by.end() &&
        std::find(keys.begin(), keys.end(), key) == keys.end())
      keys.push_back(key);
  };
  if (!source.is_object()) return keys;
  const Json axes = source.value("axes", Json::object());
  if (axes.is_object())
    for (const auto& [key, values] : axes.items())  // one level pools nothing
      if (values.is_array() && values.size() >= 2) add(key);
  // A random search's keys take a value per sample: each sample is a stratum of its own.
  const Json search = source.value("search", Json::object());
  const Json space = search.is_object() ? search.value("space", Json::object()) : Json::object();
  if (space.is_object() && search.value("samples", 0) >= 2)
    for (const auto& [key, dist] : space.items()) add(key);
  return keys;
}

Status ValidateGridEncoding(const std::string& text, const std::string& file,
                            const std::vector<std::string>& sets) {
  size_t bad = FirstInvalidUtf8(text);
  if (bad != std::string::npos) {
    size_t line = 1 + size_t(std::count(text.begin(), text.begin() + long(bad), '\n'));
    return Invalid(EscapeForMessage(file),
                   "byte " + std::to_string(bad) + " (line " + std::to_string(line) + ")",
                   "not valid UTF-8 (a grid file is UTF-8 text)");
  }
  for (const std::string& set : sets)
    if (!IsValidUtf8(set))
      return Invalid(EscapeForMessage(file), "--set \"" + EscapeForMessage(set) + "\"",
                     "not valid UTF-8");
  return Status::Ok();
}

StatusOr<Grid> ExpandGrid(const std::string& text, const std::string& file,
                          const std::vector<std::string>& sets) {
  HEADLAB_RETURN_IF_ERROR(ValidateGridEncoding(text, file, sets));
  auto parsed = ParseJson(text, file);
  if (!parsed.ok()) return parsed.status();
  Json root = std::move(parsed.value());
  if (!root.is_object()) return Invalid(file, "$", "expected an object (a grid), got " + Got(root));
  // Each part is checked even when another is bad, so that one submit names every problem.
  ErrorList errors;
  errors.Add(CheckKnownKeys(root, file, "$",
                            {"name", "description", "base", "axes", "arms", "pair_by",
                             "comparisons", "max_attempts", "search"}));
  std::map<std::string, std::string> set_axes;  // axis key -> the --set argument that made it
  for (const auto& set : sets) errors.Add(ApplySet(set, file, &set_axes, &root));

  Grid grid;
  grid.file = file;
  auto name = RequiredString(root, "name", file, "$", "a name matching [A-Za-z0-9_.-]{1,64}");
  if (!name.ok())
    errors.Add(name.status());
  else if (!IsName(name.value()))
    errors.Add(Invalid(file, "$.name",
                       "expected a name matching [A-Za-z0-9_.-]{1,64}, got " + Got(name.value())));
  else
    grid.name = name.value();
  if (root.contains("description")) {
    if (!root["description"].is_string())
      errors.Add(
          Invalid(file, "$.description", "expected a string, got " + Got(root["description"])));
    else
      grid.description = root["description"].get<std::string>();
  }
  StatusOr<Json> base = Invalid(file, "$.base", "required: a run config object");
  if (root.contains("base")) base = FlattenRunConfig(root["base"], file, "$.base");
  errors.Add(base.status());
  auto axes = ParseAxes(root, file);
  errors.Add(axes.status());
  auto arms = ParseArms(root, file);
  errors.Add(arms.status());
  auto pair_by = ParsePairBy(root, file);
  if (errors.Add(pair_by.status())) grid.pair_by = pair_by.value();
  auto search = ParseSearch(root, file);
  errors.Add(search.status());
  if (arms.ok()) {  // comparisons name arms
    auto comparisons = ParseComparisons(root, file, arms.value());
    if (errors.Add(comparisons.status())) grid.comparisons = comparisons.value();
  }
  if (root.contains("max_attempts")) {
    const Json& m = root["max_attempts"];
    if (!m.is_number_integer() || m.get<int64_t>() < kMinAttempts ||
        m.get<int64_t>() > kMaxAttempts)
      errors.Add(Invalid(file, "$.max_attempts", "expected an integer in [1, 20], got " + Got(m)));
    else
      grid.max_attempts = m.get<int>();
  }
  HEADLAB_RETURN_IF_ERROR(errors.ToStatus());
  for (const auto& [arm, overrides] : arms.value()) {
    grid.arms.push_back(arm);
    for (const Axis& a : axes.value()) {
      if (!overrides.contains(a.key)) continue;
      auto set = set_axes.find(a.key);
      if (set != set_axes.end())
        return Invalid(file, "--set \"" + set->second + "\"",
                       "arm \"" + arm + "\" sets " + a.key +
                           " itself, so an axis on it would "
                           "make that axis's runs identical; sweep a key the arms leave alone "
                           "(e.g. --set seed=1,2,3) or change the arms");
      return Invalid(file, "$.arms." + arm + "." + a.key,
                     "also an axis: the override would make that axis's runs identical");
    }
  }

  // A searched key is drawn per sample: neither an axis nor an arm may set it too.
  for (const SearchDim& d : search->dims) {
    for (const Axis& a : axes.value())
      if (a.key == d.key)
        return Invalid(file, "$.search.space." + d.key,
                       "also an axis: search or sweep a key, not both");
    for (const auto& [arm, overrides] : arms.value())
      if (overrides.contains(d.key))
        return Invalid(file, "$.arms." + arm + "." + d.key,
                       "also searched ($.search.space): the arm would override every draw");
    for (const std::string& k : grid.pair_by)
      if (k == d.key)
        return Invalid(file, "$.search.space." + d.key,
                       "also in pair_by: runs of different draws would be paired");
  }
  const std::vector<Json> samples =
      search->samples > 0 ? DrawSamples(*search) : std::vector<Json>{Json::object()};

  size_t per_arm = samples.size();
  if (per_arm * grid.arms.size() > kMaxRuns)
    return Invalid(file, "$.search.samples",
                   "the grid expands to more than " + std::to_string(kMaxRuns) + " runs");
  for (const Axis& a : axes.value()) {
    per_arm *= a.values.size();
    if (per_arm * grid.arms.size() > kMaxRuns)
      return Invalid(file, "$.axes",
                     "the grid expands to more than " + std::to_string(kMaxRuns) + " runs");
  }
  HEADLAB_RETURN_IF_ERROR(CheckExpandedBytes(base.value(), axes.value(), arms.value(),
                                             per_arm * grid.arms.size(), file));

  // Expansion: arms in lexicographic order, then the search's samples in draw order, then
  // the cartesian product of the axes in lexicographic key order with the last axis
  // varying fastest (an odometer).
  grid.runs.reserve(per_arm * grid.arms.size());
  const std::vector<Axis>& ax = axes.value();
  const size_t per_sample = per_arm / samples.size();
  for (const auto& [arm, overrides] : arms.value()) {
    std::vector<size_t> pos(ax.size(), 0);
    for (size_t n = 0; n < per_arm; ++n) {
      const Json& sample = samples[n / per_sample];
      Json flat = base.value();
      for (auto& [k, v] : sample.items()) flat[k] = v;
      for (size_t a = 0; a < ax.size(); ++a) flat[ax[a].key] = ax[a].values[pos[a]];
      for (auto& [k, v] : overrides.items()) flat[k] = v;
      ExpandedRun run;
      run.index = int(grid.runs.size());
      run.arm = arm;
      std::string label = RunLabel(run.index, arm, ax, pos);
      if (!sample.empty())
        label.insert(label.size() - 1,
                     ", sample " + std::to_string(n / per_sample) + " " + sample.dump());
      auto config = BuildRunConfig(flat, file + ": " + label, "$");
      if (!config.ok()) return config.status();
      run.config = std::move(config.value());
      run.config_hash = Sha256Hex(CanonicalJson(run.config));
      Json pair = Json::array();
      for (const auto& k : grid.pair_by) pair.push_back(run.config[RunConfigPointer(k)]);
      run.pair_key = CanonicalJson(pair);
      grid.runs.push_back(std::move(run));
      for (size_t a = ax.size(); a-- > 0;) {  // advance the odometer, last axis fastest
        if (++pos[a] < ax[a].values.size()) break;
        pos[a] = 0;
      }
    }
  }
  HEADLAB_RETURN_IF_ERROR(CheckComparisonMetrics(grid, file));
  grid.source = std::move(root);
  return grid;
}

}  // namespace headlab
