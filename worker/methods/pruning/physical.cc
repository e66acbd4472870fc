// Physical head pruning: the layer shrinks its projections; the AdamW moments follow.
#include "worker/methods/pruning/physical.h"

#include <string>
#include <sstream>
#include <type_traits>

namespace headlab {
namespace {

// The key of a parameter's entry in Optimizer::state(): its TensorImpl address, as a string
// in LibTorch 1.x and as the pointer itself in later versions.
template <typename Map>
typename Map::key_type StateKey(const Map&, const torch::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    // What LibTorch 1.x's c10::guts::to_string does (gone in 2.x): the pointer as printed.
    std::ostringstream key;
    key << p.unsafeGetTensorImpl();
    return key.str();
  } else
    return static_cast<typename Map::key_type>(p.unsafeGetTensorImpl());
}

}  // namespace

torch::optim::AdamWParamState* AdamWStateOf(torch::optim::AdamW& optimizer,
                                            const torch::Tensor& param) {
  auto& state = optimizer.state();
  auto it = state.find(StateKey(state, param));
  if (it == state.end()) return nullptr;
  return &static_cast<torch::optim::AdamWParamState&>(*it->second);
}

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
    if (s.max_exp_avg_sq().defined())
      s.max_exp_avg_sq(s.max_exp_avg_sq().index_select(dim, kept));
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
