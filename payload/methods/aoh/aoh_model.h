// AoH on a model (payload/exec/model.h): score every head from its frozen weights, label
// retrieval/streaming heads, install the labels as hybrid-layer head states, reorder heads
// into contiguous slices (AoH §5) and map reuse heads to anchor heads (App. J.2).
// Included only by LibTorch translation units.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "common/status.h"
#include "payload/exec/model.h"
#include "payload/methods/aoh/aoh_options.h"
#include "payload/methods/aoh/head_labels.h"
#include "payload/methods/aoh/kernel_spectrum.h"

namespace headlab::aoh {

struct AohPlan {
  AohOptions options;
  std::vector<std::vector<SpectralScores>> head_scores;  // [layer][query head]
  std::vector<std::vector<double>> group_scores;         // [layer][KV group], options.metric
  std::vector<std::vector<Role>> group_roles;            // [layer][KV group]
  std::vector<std::vector<Role>> head_roles;             // [layer][query head]
};

// Returns W_Q^h, the [d_head, d_model] query rows of head h of `layer`, and W_K^g(h), the
// key rows of its KV group (views of the weights).
torch::Tensor QueryRows(GptImpl& model, int64_t layer, int64_t head);
torch::Tensor KeyRows(GptImpl& model, int64_t layer, int64_t head);

// Returns every query head's scores [layer][head] from the weights alone (AoH §4):
// vanilla when rope_max_distance is 0, else RoPE-aware (§6.4; InvalidArgument unless the
// model uses RoPE).
StatusOr<std::vector<std::vector<SpectralScores>>> ScoreModel(GptImpl& model,
                                                              int64_t rope_max_distance);

// Scores, aggregates per KV group and labels `model`'s heads (AoH §4). Does not change the
// model.
StatusOr<AohPlan> PlanAoh(GptImpl& model, const AohOptions& options);

// Installs `plan` on `model`: retrieval heads ordinary, streaming heads
// streaming(sink, recent) (AoH §5). Works before, during or after training: the hybrid
// layer applies the states in every later forward.
void ApplyPlan(GptImpl& model, const AohPlan& plan);

// Returns the head_maps rows of `plan`; score = the head's effective rank (vanilla or
// RoPE-aware, as planned).
std::vector<HeadMapRow> PlanHeadMaps(const AohPlan& plan);

// Returns the per-layer Spearman correlation between vanilla and RoPE-aware
// effective-rank scores with rotations up to `max_distance` (AoH Table 6).
StatusOr<std::vector<double>> RopeSpearman(GptImpl& model, int64_t max_distance);

// Returns the contiguous order of every layer of `plan` (AoH §5).
std::vector<HeadOrder> PlanOrders(const AohPlan& plan, int64_t heads);

// Physically permutes `layer`'s heads: new query head i is old head order.head_perm[i], new
// KV head j old order.group_perm[j]; q/k/v rows, o_proj columns, head states and fixed-head
// buffers move together, so the model computes exactly the same function (AoH §5, J.3).
void ReorderLayer(GptImpl& model, int64_t layer, const HeadOrder& order);
// Returns the order that undoes `order` (ReorderLayer(m, l, Inverse(o)) after
// ReorderLayer(m, l, o) restores every weight bit for bit).
HeadOrder InverseOrder(const HeadOrder& order);

// App. J.2 head mapping: layers form blocks of `block` consecutive layers; the first of each
// block is the anchor. Returns map[layer][head] = the anchor-layer retrieval head with the
// largest normalised Frobenius inner product of kernel matrices (App. L) for each
// retrieval head of a reuse layer, else -1 (anchor layers, streaming heads, block <= 1, or
// an anchor layer without retrieval heads).
std::vector<std::vector<int64_t>> AnchorHeadMap(GptImpl& model,
                                                const std::vector<std::vector<Role>>& head_roles,
                                                int64_t block);

}  // namespace headlab::aoh
