// SAF calibration in layer chunks under a memory budget, reduced to per-head summaries.
#include "payload/methods/saf/chunked_calibration.h"

#include <algorithm>

#include "payload/exec/bench_clock.h"

namespace headlab::saf {
namespace {

int64_t Bytes(const std::vector<torch::Tensor>& ts) {
  int64_t total = 0;
  for (const torch::Tensor& t : ts)
    if (t.defined()) total += int64_t(t.nbytes());
  return total;
}

// [H, T, T] fp32 tensors a layer's statistics hold: the sum of A, and on request the
// per-entry M2 of A and the sum and M2 of S (RunningMoments).
int64_t MomentTensors(const CalibrationNeeds& needs) {
  return 1 + (needs.entry_variance ? 1 : 0) + (needs.logits ? 2 : 0);
}

// The bytes of the residual streams [B, T, C] of `batches` in the model's weight dtype.
int64_t ResidualBytes(const ModelView& model, const std::vector<torch::Tensor>& batches) {
  const torch::Tensor& w = model.layers[0].o_weight;
  int64_t total = 0;
  for (const torch::Tensor& t : batches)
    total += t.size(0) * t.size(1) * w.size(0) * int64_t(w.element_size());
  return total;
}

// Walks layers [first, last) of one token batch, calling at_layer(l, R_l) on each. The
// stream enters from the embedding (first == 0) or from *cache, and leaves into *cache when
// a later chunk needs it; the forward stops after the chunk's last layer.
template <typename AtLayer>
void WalkChunk(const ModelView& model, const torch::Tensor& tokens, int64_t first, int64_t last,
               torch::Tensor* cache, AtLayer&& at_layer) {
  const int64_t L = int64_t(model.layers.size());
  torch::Tensor r = first == 0 ? model.embed(tokens) : *cache;
  for (int64_t l = first; l < last; ++l) {
    at_layer(l, r);
    if (l + 1 < last || last < L)
      r = model.layers[size_t(l)].block(r);  // not after the model's last
  }
  *cache = last < L ? r : torch::Tensor();
}

}  // namespace

std::vector<double> CalibrationSummary::VarianceScores() const {
  std::vector<double> out;
  for (const HeadSummary& s : head) out.push_back(s.variance);
  return out;
}

std::vector<double> CalibrationSummary::ForwardKlScores() const {
  std::vector<double> out;
  for (const HeadSummary& s : head) out.push_back(s.forward_kl);
  return out;
}

void SummarizeLayers(const CalibrationStats& stats, int64_t first_layer, double floor,
                     CalibrationSummary* out) {
  torch::NoGradGuard no_grad;
  for (int64_t l = 0; l < stats.layers(); ++l)
    for (int64_t h = 0; h < stats.heads(); ++h) {
      HeadSummary& s = out->head[size_t((first_layer + l) * out->heads + h)];
      s.variance = stats.VarianceScore(l, h);
      s.forward_kl = stats.ForwardKlScore(l, h);
      // On the statistics' device: at T = 8192 one head's float64 target is 512 MB.
      torch::Tensor p = PrepareTarget(stats.Mean(l, h), floor);
      Marginals m = SufficientStatistics(p);
      s.eta = {m.eta_abs.cpu(), m.eta_rel.cpu()};
      s.target_entropy = MeanRowEntropy(p);
    }
}

int64_t LayersPerChunk(int64_t layers, int64_t layer_bytes, int64_t cache_bytes,
                       int64_t memory_bytes) {
  if (layers * layer_bytes <= memory_bytes) return layers;
  return std::clamp<int64_t>((memory_bytes - cache_bytes) / std::max<int64_t>(1, layer_bytes), 1,
                             layers);
}

ChunkedCalibration CalibrateInChunks(const ModelView& model,
                                     const std::vector<torch::Tensor>& batches,
                                     const ChunkedCalibrationOptions& o) {
  TORCH_CHECK(!batches.empty() && !model.layers.empty(), "calibration needs batches and layers");
  torch::NoGradGuard no_grad;
  EvalModeScope eval(model.module);
  const int64_t L = int64_t(model.layers.size()), H = model.heads, T = batches[0].size(1);
  const torch::Device device = batches[0].device();
  const int64_t device_peak_before = DevicePeakMemoryBytes(device);
  const std::vector<torch::Tensor> no_outputs;
  const std::vector<torch::Tensor>& outs = o.output_batches ? *o.output_batches : no_outputs;

  ChunkedCalibration result;
  CalibrationSummary& sum = result.summary;
  sum.layers = L;
  sum.heads = H;
  sum.head.resize(size_t(L * H));
  if (o.output_batches) result.outputs = EmptyOutputStats(L, H);
  const int64_t layer_bytes = H * T * T * int64_t(sizeof(float)) * MomentTensors(o.needs);
  const int64_t cache_bytes =
      ResidualBytes(model, batches) + (outs.empty() ? 0 : ResidualBytes(model, outs));
  sum.layers_per_chunk =
      o.keep_stats ? L : LayersPerChunk(L, layer_bytes, cache_bytes, o.memory_bytes);

  std::vector<torch::Tensor> cache(batches.size()), out_cache(outs.size());
  for (int64_t first = 0; first < L; first += sum.layers_per_chunk) {
    const int64_t last = std::min(L, first + sum.layers_per_chunk);
    CalibrationStats stats(last - first, H, o.needs);
    for (size_t b = 0; b < batches.size(); ++b)
      WalkChunk(model, batches[b], first, last, &cache[b], [&](int64_t l, const torch::Tensor& r) {
        LayerAttention a =
            ComputeLayerAttention(model, l, model.layers[size_t(l)].attention_input(r));
        if (!o.needs.logits) a.scores = torch::Tensor();  // free before the moments' temporaries
        stats.Add(l - first, a.att, a.scores);
      });
    for (size_t b = 0; b < outs.size(); ++b) {
      torch::Tensor idx = QueryIndex(outs[b], o.output_queries);
      WalkChunk(model, outs[b], first, last, &out_cache[b], [&](int64_t l, const torch::Tensor& r) {
        AddLayerOutputs(model, l, r, stats.layer(l - first).att.Mean(), idx, &result.outputs);
      });
      if (first == 0) result.outputs.rows += outs[b].size(0) * idx.size(0);
    }
    sum.statistics_bytes_peak =
        std::max(sum.statistics_bytes_peak, stats.bytes() + Bytes(cache) + Bytes(out_cache));
    SummarizeLayers(stats, first, o.floor, &sum);
    ++sum.chunks;
    if (o.keep_stats) result.stats.emplace(std::move(stats));
  }
  if (device.is_cuda()) {
    SynchronizeDevice(device);
    sum.device_bytes_peak = DevicePeakMemoryBytes(device);
    sum.device_peak_raised = sum.device_bytes_peak > device_peak_before;
  }
  return result;
}

}  // namespace headlab::saf
