// Physical head pruning: the layer shrinks its projections; the AdamW moments follow.
#include "payload/methods/pruning/physical.h"

namespace headlab {

RemovalCounts RemoveHeadsPhysically(Gpt& model, const std::vector<HeadRef>& heads,
                                    torch::optim::AdamW* optimizer) {
  RemovalCounts counts;
  auto slice_state = [&](const torch::Tensor& param, int64_t dim, const torch::Tensor& kept) {
    torch::optim::AdamWParamState* st = optimizer ? AdamWStateOf(*optimizer, param) : nullptr;
    if (!st) return;  // no update yet: nothing to keep
    torch::optim::AdamWParamState& s = *st;
    // index_select copies the retained entries bit for bit; step stays as it was.
    if (s.exp_avg().defined()) s.exp_avg(s.exp_avg().index_select(dim, kept));
    if (s.exp_avg_sq().defined()) s.exp_avg_sq(s.exp_avg_sq().index_select(dim, kept));
    if (s.max_exp_avg_sq().defined()) s.max_exp_avg_sq(s.max_exp_avg_sq().index_select(dim, kept));
  };
  for (int64_t l = 0; l < model->config().layers; ++l) {
    std::vector<int64_t> layer_heads;
    for (const HeadRef& r : heads)
      if (r.layer == l) layer_heads.push_back(r.head);
    if (layer_heads.empty()) continue;
    HybridAttention& attn = model->attention(l);
    const size_t q_before = attn->kept_heads().size(), kv_before = attn->kept_kv_heads().size();
    attn->RemoveHeads(layer_heads, slice_state);
    counts.heads += int64_t(q_before - attn->kept_heads().size());
    counts.kv_heads += int64_t(kv_before - attn->kept_kv_heads().size());
  }
  return counts;
}

int64_t ParameterCount(Gpt& model) {
  int64_t n = 0;
  for (const torch::Tensor& p : model->parameters()) n += p.numel();
  return n;
}

}  // namespace headlab
