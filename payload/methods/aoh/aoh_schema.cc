// The aoh.* keys: arm, labels, streaming cache, evaluation (AoH §4-§6, App. J).
#include "payload/methods/aoh/aoh_schema.h"

namespace headlab::aoh {
namespace {

std::vector<ConfigKey> Keys() {
  return {
      StrKey("aoh.method", "none", JoinNames(kMethodNames)),
      NumKey("aoh.sparsity", 0, 1, 0.5),  // s: k = ceil((1 - s) G) retrieval groups per layer
      StrKey("aoh.metric", "effective_rank", JoinNames(kMetricNames)),  // Table 4
      StrKey("aoh.gqa_agg", "mean", JoinNames(kAggregationNames)),      // Table 5
      IntKey("aoh.sink", 0, 1048576, 128),    // streaming heads' sink tokens (§5)
      IntKey("aoh.recent", 1, 1048576, 256),  // streaming heads' recent window
      IntKey("aoh.rope_max_distance", 1, 1e7, 32768),  // aoh_rope's scoring distance
      IntKey("aoh.random_seed", 0, 9007199254740992.0, 0),
      IntKey("aoh.apply_step", -1, 1e8, -1),  // -1: after training; s: convert at step s
      IntKey("aoh.prefill_chunk", 1, 1048576, 512),
      StrKey("aoh.eviction", "chunk", JoinNames(kEvictionNames)),  // streaming eviction (§5)
      StrKey("aoh.decode_path", "graph", JoinNames(kDecodePathNames)),  // streaming_decode.h
      IntKey("aoh.anchor_block", 0, 128, 0),  // > 1: anchor-reuse blocks (App. J.2)
      IntKey("aoh.anchor_topk", 1, 1048576, 64),
      StrKey("aoh.passkey_lengths", "", nullptr),  // comma-separated; "" = no passkey eval
      StrKey("aoh.passkey_depths", "0.2,0.4,0.6,0.8", nullptr),
      IntKey("aoh.passkey_samples", 1, 100000, 8),
      StrKey("aoh.bench_contexts", "", nullptr),  // comma-separated; "" = no latency bench
      IntKey("aoh.bench_decode_tokens", 0, 1e6, 32),
      IntKey("aoh.bench_repeats", 1, 1000, 3),
  };
}

[[maybe_unused]] const bool kRegistered = RegisterMethodSchema(
    {"aoh", /*after=*/"passkey", Keys(), nullptr, "payload/methods/aoh/README.md"});

}  // namespace
}  // namespace headlab::aoh
