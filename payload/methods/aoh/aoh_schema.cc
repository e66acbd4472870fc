// The aoh.* keys: arm, labels, streaming cache, evaluation (AoH §4-§6, App. J).
#include "payload/methods/aoh/aoh_schema.h"

namespace headlab::aoh {
namespace {

std::vector<ConfigKey> Keys() {
  return {
      StrKey("aoh.method", "none", JoinNames(kMethodNames),
             "arm: full attention, AoH, AoH-RoPE, Random_avg, Reverse"),
      NumKey("aoh.sparsity", 0, 1, 0.5, "s; k = ⌈(1−s)G⌉ retrieval KV groups per layer"),
      StrKey("aoh.metric", "effective_rank", JoinNames(kMetricNames), "the head score (Table 4)"),
      StrKey("aoh.gqa_agg", "mean", JoinNames(kAggregationNames),
             "the GQA aggregation over a KV group's query heads (Table 5)"),
      IntKey("aoh.sink", 0, 1048576, 128, "streaming heads' sink tokens (§5)"),
      IntKey("aoh.recent", 1, 1048576, 256, "streaming heads' recent window (§5)"),
      IntKey("aoh.rope_max_distance", 1, 1e7, 32768, "Δmax of `aoh_rope`"),
      IntKey("aoh.random_seed", 0, 9007199254740992.0, 0, "extra seed of the random control"),
      IntKey("aoh.apply_step", -1, 1e8, -1,
             "-1: apply after training (inference on the final weights); s: convert at step s and "
             "keep training"),
      IntKey("aoh.prefill_chunk", 1, 1048576, 512, "chunked-prefill chunk K"),
      StrKey(
          "aoh.eviction", "chunk", JoinNames(kEvictionNames),
          "when streaming heads trim to sink + recent: after each chunk of K (§5; query q of the "
          "chunk at c = ⌊q/K⌋K sees k < sink or k ≥ c − recent, in training/eval masks and the "
          "decoder alike) or after every token (StreamingLLM: q − k < recent)"),
      StrKey("aoh.decode_path", "graph", JoinNames(kDecodePathNames),
             "decode steps on CUDA: the decode kernel with each step replayed from a captured CUDA "
             "graph, the same kernel launched op by op, or the reference (the CPU always takes "
             "the reference)"),
      IntKey("aoh.anchor_block", 0, 128, 0, "> 1: anchor-reuse blocks of B layers (App. J.2)"),
      IntKey("aoh.anchor_topk", 1, 1048576, 64, "anchor top-k token indices"),
      StrKey("aoh.passkey_lengths", "", nullptr,
             "passkey prompt lengths in the model's tokens, a comma list (§6.1; "
             "payload/exec/passkey_prompts.h); \"\" = no passkey eval"),
      StrKey("aoh.passkey_depths", "0.2,0.4,0.6,0.8", nullptr,
             "insertion depths, a comma list of fractions of the filler tokens"),
      IntKey("aoh.passkey_samples", 1, 100000, 8, "prompts per cell"),
      StrKey("aoh.bench_contexts", "", nullptr,
             "latency/KV context lengths, a comma list; \"\" = no bench"),
      IntKey("aoh.bench_decode_tokens", 0, 1e6, 32, "decode tokens timed per context"),
      IntKey("aoh.bench_repeats", 1, 1000, 3, "timed repeats (median)"),
  };
}

[[maybe_unused]] const bool kRegistered =
    RegisterMethodSchema({"aoh", /*after=*/"passkey", /*on_key=*/"method", /*off_value=*/"none",
                          Keys(), nullptr, "payload/methods/aoh/README.md"});

}  // namespace
}  // namespace headlab::aoh
