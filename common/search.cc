// Random search: the space, the draws, the median stopping rule.
#include "common/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "common/error_list.h"
#include "common/paired_estimators.h"
#include "common/run_config.h"
#include "common/utf8.h"

namespace headlab {
namespace {

constexpr int kMaxSamples = 100000;

Status Invalid(const std::string& file, const std::string& path, const std::string& what) {
  return Status::InvalidArgument(file + ": " + path + ": " + what);
}

std::string Got(const Json& v) { return ShortenForMessage(v.dump(), 60); }

// Parses one dimension {"uniform": [lo, hi]} | {"log_uniform": [lo, hi]} | {"choice": [...]}.
StatusOr<SearchDim> ParseDim(const std::string& key, const Json& v, const std::string& file,
                             const std::string& path) {
  if (!IsRunConfigKey(key)) return UnknownRunConfigKey(file, path, key);
  const char* expected =
      "expected {\"uniform\": [LO, HI]}, {\"log_uniform\": [LO, HI]} or "
      "{\"choice\": [V, ...]}";
  if (!v.is_object() || v.size() != 1)
    return Invalid(file, path, std::string(expected) + ", got " + Got(v));
  SearchDim d;
  d.key = key;
  // The one member by iterator: a structured binding of *v.items().begin() binds a
  // temporary proxy, which GCC 12 reports as a dangling pointer (-Wdangling-pointer).
  const std::string& kind = v.begin().key();
  const Json& arg = v.begin().value();
  if (kind == "choice") {
    d.kind = SearchDim::Kind::kChoice;
    if (!arg.is_array() || arg.empty())
      return Invalid(file, path + ".choice",
                     "expected a non-empty list of values, got " + Got(arg));
    for (size_t i = 0; i < arg.size(); ++i) {
      auto c =
          ValidateRunConfigValue(key, arg[i], file, path + ".choice[" + std::to_string(i) + "]");
      if (!c.ok()) return c.status();
      d.choices.push_back(*c);
    }
    return d;
  }
  if (kind != "uniform" && kind != "log_uniform")
    return Invalid(file, path, std::string(expected) + ", got " + Got(v));
  d.kind = kind == "uniform" ? SearchDim::Kind::kUniform : SearchDim::Kind::kLogUniform;
  if (!arg.is_array() || arg.size() != 2 || !arg[0].is_number() || !arg[1].is_number() ||
      !(arg[0].get<double>() < arg[1].get<double>()))
    return Invalid(file, path + "." + kind, "expected [LO, HI] with LO < HI, got " + Got(arg));
  d.lo = arg[0].get<double>();
  d.hi = arg[1].get<double>();
  if (d.kind == SearchDim::Kind::kLogUniform && !(d.lo > 0))
    return Invalid(file, path + ".log_uniform", "expected LO > 0, got " + Got(arg[0]));
  // Both ends must be values of the key (its type and range); an integer key's canonical
  // value is an integer, and its draws are rounded.
  for (int end = 0; end < 2; ++end) {
    auto c = ValidateRunConfigValue(key, arg[size_t(end)], file,
                                    path + "." + kind + "[" + std::to_string(end) + "]");
    if (!c.ok()) return c.status();
    d.integer = c->is_number_integer();
  }
  return d;
}

StatusOr<EarlyStop> ParseEarlyStop(const Json& v, const std::string& file,
                                   const std::string& path) {
  if (!v.is_object())
    return Invalid(file, path,
                   "expected an object {rule, metric, min_step, min_completed}, got " + Got(v));
  for (auto& [k, x] : v.items())
    if (k != "rule" && k != "metric" && k != "min_step" && k != "min_completed")
      return Invalid(file, path + "." + k,
                     "unknown key (known: rule, metric, min_step, min_completed)");
  if (v.value("rule", Json()) != "median")
    return Invalid(
        file, path + ".rule",
        "expected \"median\" (the median stopping rule), got " + Got(v.value("rule", Json())));
  EarlyStop e;
  const Json metric = v.value("metric", Json());
  if (!metric.is_string() || metric.get<std::string>().empty())
    return Invalid(file, path + ".metric",
                   "expected a per-step metric such as \"train.loss\", got " + Got(metric));
  e.metric = metric.get<std::string>();
  if (v.contains("min_step")) {
    if (!v["min_step"].is_number_integer() || v["min_step"].get<int64_t>() < 0)
      return Invalid(file, path + ".min_step",
                     "expected an integer >= 0, got " + Got(v["min_step"]));
    e.min_step = v["min_step"].get<int64_t>();
  }
  if (v.contains("min_completed")) {
    if (!v["min_completed"].is_number_integer() || v["min_completed"].get<int64_t>() < 1 ||
        v["min_completed"].get<int64_t>() > 1000)
      return Invalid(file, path + ".min_completed",
                     "expected an integer in [1, 1000], got " + Got(v["min_completed"]));
    e.min_completed = v["min_completed"].get<int>();
  }
  return e;
}

// A double in [0, 1) from the top 53 bits of one draw.
double Unit(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

}  // namespace

StatusOr<SearchSpec> ParseSearch(const Json& root, const std::string& file) {
  SearchSpec spec;
  auto it = root.find("search");
  if (it == root.end()) return spec;
  const Json& s = *it;
  if (!s.is_object())
    return Invalid(file, "$.search",
                   "expected an object {samples, seed, space, early_stop}, got " + Got(s));
  ErrorList errors;
  for (auto& [k, v] : s.items())
    if (k != "samples" && k != "seed" && k != "space" && k != "early_stop")
      errors.Add(
          Invalid(file, "$.search." + k, "unknown key (known: samples, seed, space, early_stop)"));
  const Json samples = s.value("samples", Json());
  if (!samples.is_number_integer() || samples.get<int64_t>() < 1 ||
      samples.get<int64_t>() > kMaxSamples)
    errors.Add(Invalid(file, "$.search.samples",
                       "expected the sample budget, an integer in [1, " +
                           std::to_string(kMaxSamples) + "], got " + Got(samples)));
  else
    spec.samples = samples.get<int>();
  if (s.contains("seed")) {
    if (!s["seed"].is_number_integer() || s["seed"].get<int64_t>() < 0)
      errors.Add(Invalid(file, "$.search.seed", "expected an integer >= 0, got " + Got(s["seed"])));
    else
      spec.seed = uint64_t(s["seed"].get<int64_t>());
  }
  const Json space = s.value("space", Json());
  if (!space.is_object() || space.empty()) {
    errors.Add(Invalid(file, "$.search.space",
                       "expected an object of config key -> distribution, got " + Got(space)));
  } else {
    for (auto& [key, dist] : space.items()) {  // std::map order: lexicographic keys
      auto d = ParseDim(key, dist, file, "$.search.space." + key);
      if (errors.Add(d.status())) spec.dims.push_back(std::move(*d));
    }
  }
  if (s.contains("early_stop")) {
    auto e = ParseEarlyStop(s["early_stop"], file, "$.search.early_stop");
    if (errors.Add(e.status())) spec.early_stop = *e;
  }
  HEADLAB_RETURN_IF_ERROR(errors.ToStatus());
  return spec;
}

std::vector<Json> DrawSamples(const SearchSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  std::vector<Json> out;
  out.reserve(size_t(spec.samples));
  for (int i = 0; i < spec.samples; ++i) {
    Json point = Json::object();
    for (const SearchDim& d : spec.dims) {  // one draw per dim, in key order
      const double u = Unit(rng);
      if (d.kind == SearchDim::Kind::kChoice) {
        point[d.key] =
            d.choices[std::min(d.choices.size() - 1, size_t(u * double(d.choices.size())))];
        continue;
      }
      double x = d.kind == SearchDim::Kind::kUniform
                     ? d.lo + u * (d.hi - d.lo)
                     : std::exp(std::log(d.lo) + u * (std::log(d.hi) - std::log(d.lo)));
      x = std::clamp(x, d.lo, d.hi);  // exp(log(x)) may step just outside
      if (d.integer)
        point[d.key] = int64_t(std::llround(x));
      else
        point[d.key] = x;
    }
    out.push_back(std::move(point));
  }
  return out;
}

std::optional<std::string> MedianStoppingReason(
    const EarlyStop& rule, const std::vector<StepValue>& current,
    const std::vector<std::vector<StepValue>>& completed, bool lower_better) {
  if (current.empty() || int(completed.size()) < rule.min_completed) return std::nullopt;
  int64_t step = 0;
  for (const StepValue& p : current) step = std::max(step, p.step);
  if (step < rule.min_step) return std::nullopt;
  double best = lower_better ? INFINITY : -INFINITY;
  for (const StepValue& p : current)
    if (p.step <= step) best = lower_better ? std::min(best, p.value) : std::max(best, p.value);
  std::vector<double> averages;  // each completed run's running average up to `step`
  for (const std::vector<StepValue>& run : completed) {
    double sum = 0;
    int n = 0;
    for (const StepValue& p : run)
      if (p.step <= step) {
        sum += p.value;
        ++n;
      }
    if (n > 0) averages.push_back(sum / n);
  }
  if (int(averages.size()) < rule.min_completed) return std::nullopt;
  const double median = paired::Median(averages);
  if (!(lower_better ? best > median : best < median)) return std::nullopt;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "early stop (median rule): %s best %.6g by step %lld is worse than the median "
                "%.6g of %zu completed runs' running averages",
                rule.metric.c_str(), best, static_cast<long long>(step), median, averages.size());
  return std::string(buf);
}

}  // namespace headlab
