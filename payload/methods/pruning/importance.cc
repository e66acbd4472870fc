// Gate-Taylor importance through head gates.
#include "payload/methods/pruning/importance.h"

#include <algorithm>

namespace headlab {

std::vector<std::vector<double>> GateTaylorImportance(Gpt& model,
                                                      const std::vector<torch::Tensor>& batches) {
  const int64_t L = model->config().layers, H = model->config().heads;
  std::vector<std::vector<double>> sum(size_t(L), std::vector<double>(size_t(H), 0.0));
  const bool was_training = model->is_training();
  model->eval();
  torch::AutoGradMode grad_mode(true);
  int64_t sequences = 0;
  try {
    for (const torch::Tensor& tokens : batches) {
      const int64_t B = tokens.size(0), T = tokens.size(1) - 1;
      torch::Tensor x = tokens.narrow(1, 0, T), y = tokens.narrow(1, 1, T);
      std::vector<torch::Tensor> gates;
      for (int64_t l = 0; l < L; ++l) {
        gates.push_back(torch::ones({B, H}, torch::dtype(torch::kFloat).device(tokens.device()))
                            .requires_grad_(true));
        model->attention(l)->head_gate = gates.back();
      }
      torch::Tensor logits = model->forward(x);
      // Per-sequence mean-token NLL, summed: each sequence's gates see only its own loss.
      torch::Tensor nll = torch::nn::functional::cross_entropy(
          logits.reshape({B * T, -1}), y.reshape({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
      torch::Tensor loss = nll.view({B, T}).mean(1).sum();
      std::vector<torch::Tensor> grads = torch::autograd::grad({loss}, gates, {}, false, false,
                                                               /*allow_unused=*/true);
      for (int64_t l = 0; l < L; ++l) {
        if (!grads[size_t(l)].defined()) continue;
        // SAF eq. 19: |dL_n/dxi| per sequence before averaging.
        torch::Tensor g =
            grads[size_t(l)].abs().sum(0).to(torch::kCPU, torch::kDouble).contiguous();
        for (int64_t h = 0; h < H; ++h) sum[size_t(l)][size_t(h)] += g.data_ptr<double>()[h];
      }
      sequences += B;
    }
  } catch (...) {
    for (int64_t l = 0; l < L; ++l) model->attention(l)->head_gate = torch::Tensor();
    model->train(was_training);
    throw;
  }
  for (int64_t l = 0; l < L; ++l) model->attention(l)->head_gate = torch::Tensor();
  model->train(was_training);
  for (auto& layer : sum)
    for (double& v : layer) v /= double(std::max<int64_t>(1, sequences));
  return sum;
}

std::vector<torch::Tensor> CalibrationBatches(const TokenSpan& split, uint64_t seed,
                                              int64_t context, int64_t sequences, int64_t batch,
                                              torch::Device device) {
  BatchSampler sampler(seed, context);
  std::vector<torch::Tensor> out;
  for (int64_t done = 0; done < sequences;) {
    const int64_t b = std::min(batch, sequences - done);
    std::vector<int64_t> tokens;
    sampler.Next(split, b, &tokens);
    out.push_back(torch::tensor(tokens, torch::kLong).view({b, context + 1}).to(device));
    done += b;
  }
  return out;
}

}  // namespace headlab
