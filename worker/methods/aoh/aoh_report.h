// The two calls an exec run makes for AoH, with what they report: convert a model (labels
// from the frozen weights, head states installed) and evaluate it (perplexity, passkey
// heatmap, Table 11 latency/KV rows, Table 6 Spearman), emitting metrics and JSON
// artifacts through the exec event stream. Included only by LibTorch translation units.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "common/json.h"
#include "common/status.h"
#include "worker/exec/events.h"
#include "worker/exec/model.h"
#include "worker/methods/aoh/aoh_config.h"
#include "worker/methods/aoh/aoh_model.h"

namespace headlab::aoh {

// Metric names (proposed for common/metric_names.h; README.md).
inline constexpr const char* kRetrievalHeads = "aoh.retrieval_heads";   // query heads kept global
inline constexpr const char* kPasskeyAcc = "aoh.passkey_acc";           // mean over cells (Fig. 9)
inline constexpr const char* kKvBytes = "aoh.kv_bytes";                 // after the eval windows
inline constexpr const char* kRopeSpearman = "aoh.rope_spearman";       // step = layer (Table 6)
inline constexpr const char* kBenchPrefillS = "bench.prefill_s";        // step = context length
inline constexpr const char* kBenchDecodeMs = "bench.decode_ms_per_token";
inline constexpr const char* kBenchKvBytes = "bench.kv_bytes";

// Plans AoH for `model` from cfg.options, installs it (ApplyPlan) and emits
// aoh.retrieval_heads at `step` and a log line. Requires cfg.enabled.
StatusOr<AohPlan> ConvertAndReport(GptImpl& model, const AohRunConfig& cfg, int64_t step,
                                   EventSink* events);

// Re-installs labels saved as head_maps JSON (HeadMapsJson rows: retrieval -> ordinary,
// streaming -> streaming(sink, window)), e.g. from the aoh_head_maps.json artifact on
// resume after an in-training conversion: re-planning from later weights would give other
// labels. InvalidArgument for rows outside the model or an unknown role.
Status ApplyHeadMaps(GptImpl& model, const Json& head_maps);

// Evaluates the model with its current head states (`plan` null = full attention):
// perplexity of `windows` ([N, T + 1], e.g. EvalWindows) `batch` at a time, passkey cells
// and latency rows when cfg lists lengths/contexts, per-layer Spearman of vanilla vs
// RoPE-aware scores for RoPE models with aoh_rope. Emits metrics at `step` (bench rows at
// step = context, Spearman at step = layer) and writes artifacts aoh_head_maps.json,
// aoh_passkey.json, aoh_bench.json into out_dir (Artifact events with SHA-256). Returns the
// summary values: eval.loss, eval.ppl, aoh.kv_bytes, aoh.passkey_acc (when measured),
// aoh.retrieval_heads.
StatusOr<Json> EvaluateAndReport(GptImpl& model, const AohRunConfig& cfg, const AohPlan* plan,
                                 const torch::Tensor& windows, int64_t batch, uint64_t seed,
                                 int64_t step, const std::string& out_dir, EventSink* events);

}  // namespace headlab::aoh
