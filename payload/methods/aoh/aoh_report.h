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
#include "payload/decode/decoder.h"
#include "payload/exec/events.h"
#include "payload/exec/model.h"
#include "payload/exec/passkey_prompts.h"
#include "payload/methods/aoh/aoh_model.h"
#include "payload/methods/aoh/aoh_options.h"

namespace headlab::aoh {

// Plans AoH for `model` from cfg.options, installs it (ApplyPlan) and emits
// aoh.retrieval_heads at `step` and a log line. Requires cfg.enabled.
StatusOr<AohPlan> ConvertAndReport(GptImpl& model, const AohRunConfig& cfg, int64_t step,
                                   EventSink* events);

// Re-installs labels saved as head_maps JSON (HeadMapsJson rows: retrieval -> ordinary,
// streaming -> streaming(sink, window)), e.g. from the aoh_head_maps.json artifact on
// resume after an in-training conversion: re-planning from later weights would give other
// labels. InvalidArgument for rows outside the model or an unknown role.
Status ApplyHeadMaps(GptImpl& model, const Json& head_maps);

// The plan as JSON and back (the hooks' checkpoint state: labels made from the weights at
// the conversion step cannot be recomputed from later weights). PlanFromJson takes the
// options from `options` (the run config) and checks the shapes against `model`;
// InvalidArgument naming the field otherwise.
Json PlanJson(const AohPlan& plan);
StatusOr<AohPlan> PlanFromJson(const Json& j, const AohOptions& options, const GptImpl& model);

// The KV-cache decoder's options from the run's aoh.* keys (prefill chunk, decode path;
// anchor-reuse when `plan` is given and aoh.anchor_block > 1). The one reading of those
// keys for every decoder a run makes (evaluation and bench-decode).
decode::DecoderOptions DecoderFor(GptImpl& model, const AohRunConfig& cfg, const AohPlan* plan);

// Evaluates the model with its current head states (`plan` null = full attention):
// perplexity of `windows` ([N, T + 1], e.g. EvalWindows) `batch` at a time, passkey cells
// and latency rows when cfg lists lengths/contexts, per-layer Spearman of vanilla vs
// RoPE-aware scores for RoPE models with aoh_rope. Emits metrics at `step` (bench rows at
// step = context, Spearman at step = layer) and writes artifacts aoh_head_maps.json,
// aoh_passkey.json, aoh_bench.json into out_dir (Artifact events with SHA-256). Returns the
// summary values (aoh_metrics.h): aoh.loss, aoh.ppl (through the
// streaming decoder), aoh.kv_bytes, aoh.retrieval_heads, aoh.passkey_acc (when measured),
// the longest bench context's aoh.bench.* row (when measured), aoh.rope_spearman (mean
// over layers, when measured). Passkey prompts use `passkey` (the model's tokenizer;
// nullptr = bytes).
StatusOr<Json> EvaluateAndReport(GptImpl& model, const AohRunConfig& cfg, const AohPlan* plan,
                                 const torch::Tensor& windows, int64_t batch, uint64_t seed,
                                 int64_t step, const std::string& out_dir, EventSink* events,
                                 const PasskeyCodec* passkey = nullptr);

}  // namespace headlab::aoh
