// Planned passes over the training tokens, and the grid warning.
#include "data/epoch_guard.h"

#include <cstdio>
#include <map>
#include <utility>

#include "common/run_config.h"
#include "data/shard_meta.h"

namespace headlab {
namespace {

// config[section][key] of a normalised config as a number (0 when absent: not normalised).
double Num(const Json& config, const char* section, const char* key) {
  if (!config.is_object() || !config.contains(section)) return 0;
  const Json& s = config.at(section);
  if (!s.is_object() || !s.contains(key) || !s.at(key).is_number()) return 0;
  return s.at(key).get<double>();
}

std::string Str(const Json& config, const char* section, const char* key) {
  if (!config.is_object() || !config.contains(section)) return "";
  const Json& s = config.at(section);
  if (!s.is_object() || !s.contains(key) || !s.at(key).is_string()) return "";
  return s.at(key).get<std::string>();
}

}  // namespace

std::string GroupedDigits(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out += ',';
    out += s[i];
  }
  return out;
}

double PlannedPasses(const Json& config, int64_t train_tokens) {
  StatusOr<Json> c = NormalizeRunConfig(config, "grid");
  if (!c.ok() || train_tokens <= 0) return 0;
  const double tokens = Num(*c, "train", "steps") * Num(*c, "train", "batch_size") *
                        Num(*c, "train", "grad_accum") * Num(*c, "train", "ranks") *
                        Num(*c, "model", "context");
  return tokens / double(train_tokens);
}

std::vector<std::string> EpochWarnings(const std::vector<Json>& configs) {
  std::map<std::string, ShardMeta> metas;  // folder -> meta, read once
  std::map<std::pair<std::string, int64_t>, std::pair<int64_t, const Json*>>
      over;  // (dir, passes x10) -> runs
  std::vector<Json> normalised;
  for (const Json& partial : configs) {
    StatusOr<Json> n = NormalizeRunConfig(partial, "grid");
    if (n.ok()) normalised.push_back(n.value());
  }
  for (const Json& c : normalised) {
    const std::string source = Str(c, "data", "source");
    if (source != "shards" && source != "corpus") continue;
    const std::string dir =
        source == "corpus" ? DefaultCorpusDir(Str(c, "data", "path")) : Str(c, "data", "path");
    if (!metas.count(dir)) {
      StatusOr<ShardMeta> m = ReadShardMeta(dir);
      if (!m.ok()) continue;
      metas[dir] = m.value();
    }
    // HoldOutCalibration moves the last calib_fraction of the training tokens out.
    const int64_t train =
        int64_t(double(metas[dir].train.tokens) * (1 - Num(c, "data", "calib_fraction")));
    const double passes = PlannedPasses(c, train);
    if (passes <= kMaxPassesWithoutWarning) continue;
    auto& slot = over[{dir, int64_t(passes * 10 + 0.5)}];
    if (slot.first++ == 0) slot.second = &c;
  }
  std::vector<std::string> out;
  for (const auto& [key, runs] : over) {
    const Json& c = *runs.second;
    const int64_t train =
        int64_t(double(metas[key.first].train.tokens) * (1 - Num(c, "data", "calib_fraction")));
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        "%lld run%s would pass over %s (%s training tokens) %.1f times (steps %.0f x batch %.0f x "
        "grad_accum %.0f x ranks %.0f x context %.0f): more than %.0f passes memorise the corpus; "
        "prepare a larger one (README, \"Data\") or shorten the schedule",
        static_cast<long long>(runs.first), runs.first == 1 ? "" : "s", key.first.c_str(),
        GroupedDigits(train).c_str(), PlannedPasses(c, train), Num(c, "train", "steps"),
        Num(c, "train", "batch_size"), Num(c, "train", "grad_accum"), Num(c, "train", "ranks"),
        Num(c, "model", "context"), kMaxPassesWithoutWarning);
    out.push_back(buf);
  }
  return out;
}

}  // namespace headlab
