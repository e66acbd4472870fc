// SAF method options: names of patterns and schedules, and the typed `saf` config section.
#include "payload/methods/saf/saf_options.h"

#include <iterator>
#include <stdexcept>

#include "payload/methods/saf/saf_schema.h"

namespace headlab::saf {

static_assert(std::size(kPatternNames) == size_t(PatternKind::kStructuredRandom) + 1);
static_assert(std::size(kScheduleNames) == size_t(ScheduleKind::kTrainLoss) + 1);

const char* PatternKindName(PatternKind k) { return kPatternNames[int(k)]; }
StatusOr<PatternKind> ParsePatternKind(const std::string& name) {
  return ParseNamed<PatternKind>(kPatternNames, name, "SAF pattern");
}
const char* ScheduleKindName(ScheduleKind k) { return kScheduleNames[int(k)]; }
StatusOr<ScheduleKind> ParseScheduleKind(const std::string& name) {
  return ParseNamed<ScheduleKind>(kScheduleNames, name, "SAF schedule");
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
  // The values were validated against saf_schema.cc by NormalizeRunConfig.
  SafOptions o;
  try {
    const Json& s = config.at("saf");
    o.method = s.at("method").get<std::string>();
    o.rate = s.at("rate").get<double>();
    o.score = SchemaChecked(ParseScoreKind(s.at("score").get<std::string>()));
    o.pattern = SchemaChecked(ParsePatternKind(s.at("pattern").get<std::string>()));
    o.storage = s.at("storage").get<std::string>();
    o.schedule = SchemaChecked(ParseScheduleKind(s.at("schedule").get<std::string>()));
    o.tau = s.at("tau").get<double>();
    o.tau_start = s.at("tau_start").get<double>();
    o.tau_end = s.at("tau_end").get<double>();
    o.groups = s.at("groups").get<int64_t>();
    o.calib_sequences = s.at("calib_sequences").get<int64_t>();
    o.calib_batch = s.at("calib_batch").get<int64_t>();
    o.calib_split = s.at("calib_split").get<std::string>();
    o.calib_memory_gb = s.at("calib_memory_gb").get<double>();
    o.output_sequences = s.at("output_sequences").get<int64_t>();
    o.output_queries = s.at("output_queries").get<int64_t>();
    o.fit_steps = s.at("fit_steps").get<int64_t>();
    o.fit_lr = s.at("fit_lr").get<double>();
    o.fit_max_kl = s.at("fit_max_kl").get<double>();
    o.fit_path = s.at("fit_path").get<std::string>();
    o.heads = s.at("heads").get<std::string>();
    o.dirichlet_scale = s.at("dirichlet_scale").get<double>();
    o.trainable = s.at("trainable").get<int64_t>() == 1;
    o.budget = s.at("budget").get<double>();
    o.group_heads = s.at("group_heads").get<int64_t>();
    o.check_every = s.at("check_every").get<int64_t>();
    o.z = s.at("z").get<double>();
    o.window = s.at("window").get<int64_t>();
    o.pattern_seed = s.at("pattern_seed").get<int64_t>();
    o.selection_seed = s.at("selection_seed").get<int64_t>();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(file + ": $.saf: expected a normalised run config (" + e.what() +
                                   ")");
  }
  return o;
}

}  // namespace headlab::saf
