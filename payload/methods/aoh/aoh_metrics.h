// The names of the metrics AoH reports (evaluation and latency rows, summary values).
// The build lists this header's names in the metric catalog (cmake/metric_names.cmake,
// common/metric_catalog.h), so grids may compare on them; the method owns them, common/
// names none of them. Torch-free.
#pragma once

namespace headlab::metric {

// AoH (payload/methods/aoh/README.md): evaluation of the run's head labels (full attention
// when aoh.method is none) through the streaming decoder. Summaries, emitted as metrics at
// the final step unless noted.
inline constexpr const char* kAohRetrievalHeads = "aoh.retrieval_heads";  // query heads kept global
inline constexpr const char* kAohLoss = "aoh.loss";  // nats/token, chunked prefill + eviction
inline constexpr const char* kAohPpl = "aoh.ppl";    // exp(aoh.loss)
inline constexpr const char* kAohKvBytes = "aoh.kv_bytes";  // KV cache after an eval window
// mean over length x depth (Fig. 9)
inline constexpr const char* kAohPasskeyAcc = "aoh.passkey_acc";
// step = layer; summary: mean (Table 6)
inline constexpr const char* kAohRopeSpearman = "aoh.rope_spearman";
// Latency rows (Table 11's columns), metrics at step = context length; the summary holds
// the longest context's row. The device label is in provenance (aoh_bench_device) and
// in the aoh_bench artifact.
inline constexpr const char* kAohBenchPrefillS = "aoh.bench.prefill_s";
inline constexpr const char* kAohBenchDecodeMs = "aoh.bench.decode_ms_per_token";
inline constexpr const char* kAohBenchKvBytes = "aoh.bench.kv_bytes";  // after the decoded tokens
inline constexpr const char* kAohBenchContext = "aoh.bench.context";   // summary: the row's context
// Summary of a run that converts mid-training (train_hooks.cc): the step whose weights
// labelled the heads.
inline constexpr const char* kAohConvertedAt = "aoh.converted_at";

}  // namespace headlab::metric
