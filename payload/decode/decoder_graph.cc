// The decoder's CUDA-graph decode step (DecodePath::kGraph): the compute-dtype weights it
// reads (ComputeWeights), the ring layout of bounded caches while steps run, RoPE tables of
// every position, and the capture and replay of one step.
#include "payload/decode/decoder.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "payload/decode/decoder_internal.h"

#if HEADLAB_TORCH_CUDA
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/cuda.h>
#endif

namespace headlab::decode {

ComputeWeights ComputeWeights::Make(GptImpl& model) {
  ComputeWeights w;
  const torch::Tensor& head = model.HeadWeight();
  if (model.precision() != Precision::kFp32) {
    const torch::ScalarType dtype = ComputeDtype(model.precision());
    for (const auto& module : model.modules(/*include_self=*/false)) {
      auto* linear = dynamic_cast<torch::nn::LinearImpl*>(module.get());
      if (linear == nullptr) continue;
      for (const torch::Tensor& p : {linear->weight, linear->bias})
        if (p.defined() && p.scalar_type() != dtype) {
          w.params.push_back(p);
          w.copies.push_back(p.detach().to(dtype));
        }
    }
    if (head.scalar_type() != dtype) w.head = head.detach().to(dtype);
    const ModelConfig& c = model.config();
    w.qkv_weight.resize(size_t(c.layers));
    w.qkv_bias.resize(size_t(c.layers));
    for (int64_t l = 0; l < c.layers; ++l) {
      HybridAttention& a = model.attention(l);
      w.head_dim = a->head_dim();
      const bool whole = a->q_proj->weight.size(0) == c.heads * w.head_dim &&
                         a->k_proj->weight.size(0) == c.kv_heads * w.head_dim;
      const int biases = int(a->q_proj->bias.defined()) + int(a->k_proj->bias.defined()) +
                         int(a->v_proj->bias.defined());
      if (!whole || a->q_norm.defined() || a->k_norm.defined() || biases % 3 != 0) continue;
      w.qkv_weight[size_t(l)] =
          torch::cat({a->q_proj->weight, a->k_proj->weight, a->v_proj->weight}).detach().to(dtype);
      if (biases == 3)
        w.qkv_bias[size_t(l)] =
            torch::cat({a->q_proj->bias, a->k_proj->bias, a->v_proj->bias}).detach().to(dtype);
    }
  }
  for (const torch::Tensor& p : w.params) w.seen.emplace_back(p.data_ptr(), p._version());
  w.seen.emplace_back(head.data_ptr(), head._version());
  return w;
}

bool ComputeWeights::Current(const GptImpl& model) const {
  std::vector<std::pair<const void*, int64_t>> now;
  for (const torch::Tensor& p : params) now.emplace_back(p.data_ptr(), p._version());
  now.emplace_back(model.HeadWeight().data_ptr(), model.HeadWeight()._version());
  return now == seen;
}

torch::Tensor ComputeWeights::Qkv(int64_t layer, const torch::Tensor& x) const {
  if (size_t(layer) >= qkv_weight.size() || !qkv_weight[size_t(layer)].defined())
    return torch::Tensor();
  return Linear(x, qkv_weight[size_t(layer)], qkv_bias[size_t(layer)])
      .view({x.size(0), x.size(1), -1, head_dim})
      .transpose(1, 2);
}

ComputeWeightsIn::ComputeWeightsIn(const ComputeWeights& w) : w_(w) {
  for (size_t i = 0; i < w.params.size(); ++i) {
    originals_.push_back(w.params[i].data());
    torch::Tensor p = w.params[i];  // shares the parameter's TensorImpl
    p.set_data(w.copies[i]);
  }
}

ComputeWeightsIn::~ComputeWeightsIn() {
  for (size_t i = 0; i < originals_.size(); ++i) {
    torch::Tensor p = w_.params[i];
    p.set_data(originals_[i]);
  }
}

namespace {

// The slot of position p in a ring segment (KvSegment::ring).
int64_t RingSlot(int64_t p, int64_t sink, int64_t ring) {
  return p < sink ? p : sink + (p - sink) % ring;
}

// Moves a segment's slots: slot dst[i] gets what slot src[i] held (all read before any is
// written, so the two lists may overlap).
void Relayout(KvSegment* s, const std::vector<int64_t>& src, const std::vector<int64_t>& dst) {
  if (src.empty() || src == dst) return;
  const torch::Device device = s->k_buf.device();
  const torch::Tensor from = torch::tensor(src, torch::kLong).to(device);
  const torch::Tensor to = torch::tensor(dst, torch::kLong).to(device);
  s->k_buf.index_copy_(2, to, s->k_buf.index_select(2, from));
  s->v_buf.index_copy_(2, to, s->v_buf.index_select(2, from));
}

}  // namespace

const std::shared_ptr<const ComputeWeights>& KvDecoder::Weights() {
  if (!weights_ || !weights_->Current(*model_))
    weights_ = std::make_shared<const ComputeWeights>(ComputeWeights::Make(*model_));
  return weights_;
}

void KvDecoder::PrepareStepRope(torch::ScalarType dtype, const torch::Device& device) {
  const ModelConfig& c = model_->config();
  if (c.pos != "rope") return;
  if (step_cos_.defined() && step_cos_.scalar_type() == dtype && step_cos_.device() == device &&
      step_cos_.size(0) > position_)
    return;
  const int64_t rows = std::max(c.context, 2 * (position_ + 1));
  ChunkRope rope;
  MakeRope(dtype, c.HeadDim(), c.Rope(),
           torch::arange(rows, torch::dtype(torch::kLong).device(device)), &rope);
  step_cos_ = rope.cos;
  step_sin_ = rope.sin;
}

bool KvDecoder::PrepareGraphCaches(int64_t batch) {
  for (auto& layer : layers_)
    for (KvSegment& s : layer)
      if (!s.k_buf.defined() || s.k_buf.size(0) != batch) return false;
  for (auto& layer : layers_)
    for (KvSegment& s : layer) {
      if (!s.bounded) {
        // The step writes slot position_, and the kernel plans its splits over every slot
        // (decode_attention.h): keep the capacity within a slack of the position, so that
        // the splits past it are few (a prefill's doubling can leave twice the slots).
        const int64_t slack = std::max<int64_t>(64, position_ / 16), cap = s.k_buf.size(2);
        if (cap <= position_ || cap > position_ + 1 + 2 * slack) {
          Regrow(&s.k_buf, s.entries, position_ + 1 + slack, s.k_buf);
          Regrow(&s.v_buf, s.entries, position_ + 1 + slack, s.v_buf);
        }
        continue;
      }
      if (s.ring > 0) continue;
      // Linear -> ring: keep the positions the step may see (evicting any awaiting
      // compaction) and move each to its ring slot.
      const auto [a, b] = Retained(s, position_);
      std::vector<int64_t> src, dst, kept;
      for (int64_t i = 0; i < s.entries; ++i) {
        if (i >= a && i < s.entries - b) continue;
        src.push_back(i);
        kept.push_back(s.positions[size_t(i)]);
        dst.push_back(RingSlot(kept.back(), s.sink, s.recent));
      }
      if (s.k_buf.size(2) < s.sink + s.recent) {
        Regrow(&s.k_buf, s.entries, s.sink + s.recent, s.k_buf);
        Regrow(&s.v_buf, s.entries, s.sink + s.recent, s.v_buf);
      }
      Relayout(&s, src, dst);
      s.positions = kept;
      s.entries = int64_t(kept.size());
      s.ring = s.recent;
    }
  return true;
}

void KvDecoder::LeaveRings() {
  for (auto& layer : layers_)
    for (KvSegment& s : layer) {
      if (s.ring == 0) continue;
      std::vector<int64_t> src, dst;
      for (size_t i = 0; i < s.positions.size(); ++i) {
        src.push_back(RingSlot(s.positions[i], s.sink, s.ring));
        dst.push_back(int64_t(i));
      }
      Relayout(&s, src, dst);
      s.ring = 0;
    }
}

torch::Tensor KvDecoder::GraphStep(const torch::Tensor& token) {
#if HEADLAB_TORCH_CUDA
  CheckFits(1);  // on the host: a learned position past the table would fail on the device
  const int64_t B = token.size(0);
  if (!PrepareGraphCaches(B)) return torch::Tensor();
  std::vector<torch::Tensor> buffers;  // of batch B (PrepareGraphCaches)
  for (const auto& layer : layers_)
    for (const KvSegment& s : layer) {
      buffers.push_back(s.k_buf);
      buffers.push_back(s.v_buf);
    }
  if (fused_)
    buffers.push_back(DecodeCounts(B, token.device()));  // the graph's decode kernels count in it
  PrepareStepRope(ComputeDtype(model_->precision()), token.device());
  if (step_cos_.defined()) buffers.push_back(step_cos_);  // remade tables: a new capture
  auto same = [](const torch::Tensor& a, const torch::Tensor& b) { return a.is_same(b); };
  const std::shared_ptr<const ComputeWeights> weights = Weights();
  if (step_graph_ &&
      std::equal(buffers.begin(), buffers.end(), step_graph_->buffers.begin(),
                 step_graph_->buffers.end(), same) &&
      step_graph_->weights == weights) {
    step_graph_->token.copy_(token.view({B, 1}));
    step_graph_->position.fill_(position_);
  } else {
    step_graph_.reset();  // its memory pool goes before the next capture takes one
    auto g = std::make_unique<StepGraph>();
    g->token = token.view({B, 1}).to(torch::kLong).clone();
    g->position = torch::full({1}, position_, torch::dtype(torch::kLong).device(token.device()));
    g->buffers = buffers;
    g->weights = weights;
    // The step's body: the blocks at the device position, then the logits (as Chunk).
    auto body = [&] {
      AutocastScope autocast(model_->precision(), token.device());
      return model_->Logits(Blocks(g->token, g->position), g->weights->head).squeeze(1);
    };
    torch::cuda::synchronize();
    {
      // While capturing, Attention takes the graph path with the step's weights (swapped in
      // below), and whatever autocast still casts is recorded in the graph instead of cached
      // outside it, where a later clear would free what the graph reads; both restored
      // however it ends.
      struct CaptureScope {
        KvDecoder* d;
        bool cast_cache = at::autocast::is_autocast_cache_enabled();
        explicit CaptureScope(KvDecoder* decoder) : d(decoder) {
          d->capturing_ = true;
          at::autocast::set_autocast_cache_enabled(false);
        }
        ~CaptureScope() {
          d->capturing_ = false;
          at::autocast::set_autocast_cache_enabled(cast_cache);
        }
      } capture(this);
      WeightsScope reading(&weights_in_, g->weights.get());
      ComputeWeightsIn swapped(*g->weights);
      c10::cuda::CUDAStreamGuard side(at::cuda::getStreamFromPool());
      // A warm-up run on the capture stream (library workspaces, index uploads). It writes
      // this step's keys and values to their slots; the replay below writes the same.
      body();
      at::cuda::getCurrentCUDAStream().synchronize();
      g->graph.capture_begin();
      g->logits = body();
      g->graph.capture_end();
    }
    step_graph_ = std::move(g);
    ++graph_captures_;
  }
  step_graph_->graph.replay();
  ++graph_replays_;
  for (auto& layer : layers_)
    for (KvSegment& s : layer) NoteAppended(&s, position_, 1);
  position_ += 1;
  Evict(position_);
  return step_graph_->logits.clone();  // the next replay overwrites the static output
#else
  (void)token;
  return torch::Tensor();
#endif
}

}  // namespace headlab::decode
