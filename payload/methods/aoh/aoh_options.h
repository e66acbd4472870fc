// The AoH settings of a run (the aoh.* run-config keys, README.md) read into plain structs.
// Torch-free, so the exec config reader can use it without LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config_key.h"
#include "common/json.h"
#include "common/status.h"
#include "payload/decode/decode_path.h"
#include "payload/methods/aoh/head_labels.h"

namespace headlab::aoh {

// How the KV-cache decoder runs decode steps (payload/decode/decode_path.h); names in
// kDecodePathNames.
using decode::DecodePath;

// How heads are labelled. The defaults are the paper's main setting (AoH §6.1): effective
// rank, GQA mean, sink 128, recent 256, sparsity 0.5.
struct AohOptions {
  Selection selection = Selection::kAoh;
  Metric metric = Metric::kEffectiveRank;
  GroupAggregation aggregation = GroupAggregation::kMean;
  double sparsity = 0.5;          // in [0, 1]; k = ceil((1 - s) G) retrieval groups per layer
  uint64_t seed = 0;              // the Random control's draw
  int64_t sink = 128;             // streaming heads' sink tokens (AoH §5)
  int64_t recent = 256;           // streaming heads' recent window, >= 1
  int64_t rope_max_distance = 0;  // > 0: AoH-RoPE scores (§6.4; RoPE models only)
  // Streaming heads' eviction (HeadState::chunk): 0 per token; K per chunk of K tokens.
  // AohRunConfigFromJson sets aoh.prefill_chunk under aoh.eviction = chunk (the default).
  int64_t eviction_chunk = 0;
};

// Checks ranges: sparsity in [0, 1], sink >= 0, recent >= 1, rope_max_distance >= 0,
// eviction_chunk >= 0.
Status ValidateOptions(const AohOptions& o);

// Everything a run needs to apply and evaluate AoH.
struct AohRunConfig {
  bool enabled = false;  // aoh.method != "none"
  AohOptions options;
  int64_t apply_step = -1;  // -1: after training (inference only); s >= 0: convert at step s
  int64_t prefill_chunk = 512;
  DecodePath decode_path = DecodePath::kGraph;
  int64_t anchor_block = 0;  // > 1: anchor-reuse blocks (App. J.2)
  int64_t anchor_topk = 64;
  std::vector<int64_t> passkey_lengths;  // empty: no passkey evaluation
  std::vector<double> passkey_depths;
  int64_t passkey_samples = 8;
  std::vector<int64_t> bench_contexts;  // empty: no latency benchmark
  int64_t bench_decode_tokens = 32;
  int64_t bench_repeats = 3;
};

// Reads the "aoh" section of a normalised run config (NormalizeRunConfig has checked every
// key against aoh_schema.cc; a config that is not normalised is InvalidArgument). aoh.method
// maps to the selection:
// aoh -> AoH, aoh_rope -> AoH with rope_max_distance = aoh.rope_max_distance, random ->
// Random (drawn from aoh.random_seed * 1000003 + seed + parent.run * 7919, so a grid's seed
// axis or parent list averages over draws: Random_avg), reverse -> Reverse, none -> disabled (full
// attention; the evaluation keys are still read). A bad list is InvalidArgument naming `file` and
// the key.
StatusOr<AohRunConfig> AohRunConfigFromJson(const Json& config, const std::string& file);

}  // namespace headlab::aoh
