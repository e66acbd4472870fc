// AoH scoring, labelling, installation, reordering and anchor mapping on a GptImpl.
#include "payload/methods/aoh/aoh_model.h"

#include <cmath>
#include <limits>
#include <string>

namespace headlab::aoh {
namespace {

int64_t GroupSize(GptImpl& model) { return model.config().heads / model.config().kv_heads; }

// Row indices [perm.size() * d] that move block perm[i] of d rows to block i.
torch::Tensor BlockRows(const std::vector<int64_t>& perm, int64_t d, torch::Device device) {
  std::vector<int64_t> rows;
  for (int64_t p : perm)
    for (int64_t j = 0; j < d; ++j) rows.push_back(p * d + j);
  return torch::tensor(rows, torch::kLong).to(device);
}

void PermuteRows(torch::Tensor& t, const torch::Tensor& rows, int64_t dim) {
  t.copy_(t.index_select(dim, rows));
}

}  // namespace

torch::Tensor QueryRows(GptImpl& model, int64_t layer, int64_t head) {
  HybridAttention& attn = model.attention(layer);
  const int64_t d = attn->head_dim();
  return attn->q_proj->weight.narrow(0, head * d, d);
}

torch::Tensor KeyRows(GptImpl& model, int64_t layer, int64_t head) {
  HybridAttention& attn = model.attention(layer);
  const int64_t d = attn->head_dim();
  return attn->k_proj->weight.narrow(0, (head / GroupSize(model)) * d, d);  // shared W_K^g (§4)
}

StatusOr<std::vector<std::vector<SpectralScores>>> ScoreModel(GptImpl& model,
                                                              int64_t rope_max_distance) {
  const ModelConfig& c = model.config();
  if (rope_max_distance > 0 && c.pos != "rope")
    return Status::InvalidArgument("aoh.rope_max_distance > 0 needs model.pos \"rope\", got \"" +
                                   c.pos + "\"");
  torch::NoGradGuard no_grad;
  std::vector<std::vector<SpectralScores>> scores;
  for (int64_t l = 0; l < c.layers; ++l) {
    HybridAttention& attn = model.attention(l);
    scores.push_back(LayerScores(attn->q_proj->weight, attn->k_proj->weight, attn->head_dim(),
                                 c.Rope(), rope_max_distance));
  }
  return scores;
}

StatusOr<AohPlan> PlanAoh(GptImpl& model, const AohOptions& options) {
  HEADLAB_RETURN_IF_ERROR(ValidateOptions(options));
  auto scores = ScoreModel(model, options.rope_max_distance);
  if (!scores.ok()) return scores.status();
  AohPlan plan;
  plan.options = options;
  plan.head_scores = std::move(scores.value());
  std::vector<std::vector<double>> metric;
  for (const auto& layer : plan.head_scores) {
    metric.emplace_back();
    for (const SpectralScores& s : layer) metric.back().push_back(MetricValue(s, options.metric));
  }
  plan.group_scores = AggregateGroups(metric, model.config().kv_heads, options.aggregation);
  plan.group_roles = LabelGroups(plan.group_scores, options.metric, options.selection,
                                 options.sparsity, options.seed);
  plan.head_roles = HeadRoles(plan.group_roles, model.config().heads);
  return plan;
}

void ApplyPlan(GptImpl& model, const AohPlan& plan) {
  HeadState streaming;
  streaming.mode = HeadMode::kStreaming;
  streaming.sink = plan.options.sink;
  streaming.recent = plan.options.recent;
  streaming.chunk = plan.options.eviction_chunk;
  for (size_t l = 0; l < plan.head_roles.size(); ++l)
    for (size_t h = 0; h < plan.head_roles[l].size(); ++h)
      model.attention(int64_t(l))
          ->SetHeadState(int64_t(h),
                         plan.head_roles[l][h] == Role::kRetrieval ? HeadState{} : streaming);
}

std::vector<HeadMapRow> PlanHeadMaps(const AohPlan& plan) {
  std::vector<std::vector<double>> er;
  for (const auto& layer : plan.head_scores) {
    er.emplace_back();
    for (const SpectralScores& s : layer) er.back().push_back(s.effective_rank);
  }
  return HeadMapRows(er, plan.head_roles, plan.options.sink, plan.options.recent);
}

StatusOr<std::vector<double>> RopeSpearman(GptImpl& model, int64_t max_distance) {
  auto vanilla = ScoreModel(model, 0);
  auto rope = ScoreModel(model, max_distance);
  if (!rope.ok()) return rope.status();
  std::vector<double> out;
  for (size_t l = 0; l < vanilla->size(); ++l) {
    std::vector<double> a, b;
    for (const SpectralScores& s : (*vanilla)[l]) a.push_back(s.effective_rank);
    for (const SpectralScores& s : (*rope)[l]) b.push_back(s.effective_rank);
    out.push_back(Spearman(a, b));
  }
  return out;
}

std::vector<HeadOrder> PlanOrders(const AohPlan& plan, int64_t heads) {
  std::vector<HeadOrder> out;
  for (size_t l = 0; l < plan.group_roles.size(); ++l)
    out.push_back(ContiguousOrder(plan.group_roles[l], plan.group_scores[l], heads));
  return out;
}

void ReorderLayer(GptImpl& model, int64_t layer, const HeadOrder& order) {
  torch::NoGradGuard no_grad;
  HybridAttention& attn = model.attention(layer);
  const int64_t d = attn->head_dim();
  const torch::Device dev = attn->q_proj->weight.device();
  torch::Tensor q_rows = BlockRows(order.head_perm, d, dev);
  torch::Tensor kv_rows = BlockRows(order.group_perm, d, dev);
  PermuteRows(attn->q_proj->weight, q_rows, 0);
  PermuteRows(attn->k_proj->weight, kv_rows, 0);
  PermuteRows(attn->v_proj->weight, kv_rows, 0);
  PermuteRows(attn->o_proj->weight, q_rows, 1);  // o_proj reads head outputs as columns
  // Imported checkpoints' projection biases move with their rows (the o_proj bias is per
  // output feature and stays).
  if (attn->q_proj->bias.defined()) PermuteRows(attn->q_proj->bias, q_rows, 0);
  if (attn->k_proj->bias.defined()) PermuteRows(attn->k_proj->bias, kv_rows, 0);
  if (attn->v_proj->bias.defined()) PermuteRows(attn->v_proj->bias, kv_rows, 0);
  torch::Tensor heads = torch::tensor(order.head_perm, torch::kLong).to(dev);
  PermuteRows(attn->fixed_alpha, heads, 0);
  PermuteRows(attn->fixed_rho, heads, 0);
  PermuteRows(attn->fixed_log_z, heads, 0);
  torch::Tensor dense =
      attn->fixed_dense.defined() ? attn->fixed_dense.index_select(0, heads) : torch::Tensor();
  const std::vector<HeadState> old = attn->head_states();
  for (size_t i = 0; i < order.head_perm.size(); ++i) {
    const HeadState& s = old[size_t(order.head_perm[i])];
    const int64_t h = int64_t(i);
    if (s.mode != HeadMode::kFixed) {
      attn->SetHeadState(h, s);
    } else if (s.dense) {
      attn->SetFixedDense(h, dense[h]);
    } else {  // the buffers already moved; re-install to set the state
      attn->SetFixedCompact(h, attn->fixed_alpha[h].clone(), attn->fixed_rho[h].clone(),
                            attn->fixed_log_z[h].clone());
    }
  }
}

HeadOrder InverseOrder(const HeadOrder& order) {
  HeadOrder inv;
  inv.group_perm = InversePermutation(order.group_perm);
  inv.head_perm = InversePermutation(order.head_perm);
  inv.retrieval_groups = order.retrieval_groups;
  return inv;
}

std::vector<std::vector<int64_t>> AnchorHeadMap(GptImpl& model,
                                                const std::vector<std::vector<Role>>& head_roles,
                                                int64_t block) {
  torch::NoGradGuard no_grad;
  const int64_t layers = int64_t(head_roles.size());
  std::vector<std::vector<int64_t>> map;
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t heads = int64_t(head_roles[size_t(l)].size());
    map.emplace_back(size_t(heads), -1);
    if (block <= 1) continue;
    const int64_t anchor = (l / block) * block;
    if (anchor == l) continue;
    for (int64_t h = 0; h < heads; ++h) {
      if (head_roles[size_t(l)][size_t(h)] != Role::kRetrieval) continue;
      double best = -std::numeric_limits<double>::infinity();
      for (int64_t a = 0; a < heads; ++a) {
        if (head_roles[size_t(anchor)][size_t(a)] != Role::kRetrieval) continue;
        // App. J.2: the functionally closest anchor retrieval head by normalised <M_a, M_h>_F.
        double sim = NormalizedFrobenius(QueryRows(model, anchor, a), KeyRows(model, anchor, a),
                                         QueryRows(model, l, h), KeyRows(model, l, h));
        if (sim > best) {
          best = sim;
          map[size_t(l)][size_t(h)] = a;
        }
      }
    }
  }
  return map;
}

}  // namespace headlab::aoh
