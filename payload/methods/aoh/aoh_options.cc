// The aoh.* run-config keys read into AohRunConfig.
#include "payload/methods/aoh/aoh_options.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "payload/methods/aoh/aoh_schema.h"

namespace headlab::aoh {
Status ValidateOptions(const AohOptions& o) {
  if (!(o.sparsity >= 0 && o.sparsity <= 1))
    return Status::InvalidArgument("aoh.sparsity: expected a number in [0, 1], got " +
                                   std::to_string(o.sparsity));
  if (o.sink < 0) return Status::InvalidArgument("aoh.sink: expected >= 0");
  if (o.recent < 1) return Status::InvalidArgument("aoh.recent: expected >= 1");
  if (o.rope_max_distance < 0)
    return Status::InvalidArgument("aoh.rope_max_distance: expected >= 0");
  if (o.eviction_chunk < 0) return Status::InvalidArgument("aoh.eviction: expected a chunk >= 0");
  return Status::Ok();
}

StatusOr<AohRunConfig> AohRunConfigFromJson(const Json& config, const std::string& file) {
  // The values were validated against aoh_schema.cc by NormalizeRunConfig; only the lists
  // inside strings are parsed here.
  AohRunConfig r;
  std::string key;
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(file + ": $.aoh." + key + ": " + what);
  };
  try {
    const Json& a = config.at("aoh");
    key = "method";
    const std::string method = a.at("method").get<std::string>();
    // "none" (full attention) still reads the rest: a full-attention arm is evaluated
    // with the same passkey / bench settings as the AoH arms it is compared with.
    r.enabled = method != "none";
    if (method == "aoh_rope") {
      r.options.selection = Selection::kAoh;
      r.options.rope_max_distance = a.at("rope_max_distance").get<int64_t>();
    } else if (r.enabled) {
      r.options.selection = SchemaChecked(ParseSelection(method));
    }
    r.options.metric = SchemaChecked(ParseMetric(a.at("metric").get<std::string>()));
    r.options.aggregation =
        SchemaChecked(ParseGroupAggregation(a.at("gqa_agg").get<std::string>()));
    r.options.sparsity = a.at("sparsity").get<double>();
    // Random_avg (AoH Table 2) averages random draws: the draw follows the run seed and
    // the shared parent run too, so a grid's seed axis or parent.run list averages over
    // draws while runs stay paired by them.
    r.options.seed = a.at("random_seed").get<uint64_t>() * 1000003u +
                     config.at("seed").get<uint64_t>() +
                     config.at("parent").at("run").get<uint64_t>() * 7919u;
    r.options.sink = a.at("sink").get<int64_t>();
    r.options.recent = a.at("recent").get<int64_t>();
    r.apply_step = a.at("apply_step").get<int64_t>();
    r.prefill_chunk = a.at("prefill_chunk").get<int64_t>();
    // AoH §5: streaming heads evict after each prefill chunk, so the training/eval mask and
    // the decoder's chunks share K.
    r.options.eviction_chunk = a.at("eviction").get<std::string>() == "chunk" ? r.prefill_chunk : 0;
    r.decode_path = SchemaChecked(ParseNamed<DecodePath>(
        kDecodePathNames, a.at("decode_path").get<std::string>(), "aoh.decode_path"));
    r.anchor_block = a.at("anchor_block").get<int64_t>();
    r.anchor_topk = a.at("anchor_topk").get<int64_t>();
    r.passkey_samples = a.at("passkey_samples").get<int64_t>();
    r.bench_decode_tokens = a.at("bench_decode_tokens").get<int64_t>();
    r.bench_repeats = a.at("bench_repeats").get<int64_t>();
    key = "passkey_lengths";
    auto lengths = ParsePositiveIntList(a.at("passkey_lengths").get<std::string>());
    if (!lengths.ok()) return bad(lengths.status().message());
    r.passkey_lengths = lengths.value();
    key = "passkey_depths";
    auto depths = ParseFractionList(a.at("passkey_depths").get<std::string>());
    if (!depths.ok()) return bad(depths.status().message());
    r.passkey_depths = depths.value();
    key = "bench_contexts";
    auto contexts = ParsePositiveIntList(a.at("bench_contexts").get<std::string>());
    if (!contexts.ok()) return bad(contexts.status().message());
    r.bench_contexts = contexts.value();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(file + ": $.aoh: expected a normalised run config (" + e.what() +
                                   ")");
  }
  return r;
}

}  // namespace headlab::aoh
