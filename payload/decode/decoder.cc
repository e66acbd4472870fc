// The decoder's construction, cache bookkeeping (append, eviction, bytes) and the prefill
// and decode-step orchestration (AoH §5, J.3). A layer's attention: decoder_attention.cc;
// the captured CUDA-graph step: decoder_graph.cc.
#include "payload/decode/decoder.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "payload/decode/decoder_internal.h"
#include "payload/exec/attention_cuda.h"

#if HEADLAB_TORCH_CUDA
#include "kernels/torch/add_norm_op.h"
#include "kernels/torch/decode_attention_op.h"
#include "kernels/torch/decode_linear_op.h"
#endif

namespace headlab::decode {
namespace F = torch::nn::functional;
using kernels::DecodeActivation;

torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                     DecodeActivation act) {
#if HEADLAB_TORCH_CUDA
  if (kernels::DecodeLinearFits(x, w)) return kernels::DecodeLinearOf(x, w, bias, act);
#endif
  torch::Tensor y = F::linear(x, w, bias);
  if (act == DecodeActivation::kGelu) return F::gelu(y);
  if (act == DecodeActivation::kGeluTanh)
    return F::gelu(y, F::GELUFuncOptions().approximate("tanh"));
  return y;
}

torch::Tensor Linear(const torch::nn::Linear& layer, const torch::Tensor& x, DecodeActivation act) {
  return Linear(x, layer->weight, layer->bias, act);
}

torch::Tensor SelectHeads(const torch::Tensor& x, const std::vector<int64_t>& heads,
                          torch::Tensor* index) {
  bool run = true;
  for (size_t i = 1; run && i < heads.size(); ++i) run = heads[i] == heads[0] + int64_t(i);
  if (run) return x.narrow(1, heads[0], int64_t(heads.size()));
  if (!index->defined() || index->device() != x.device())
    *index = torch::tensor(heads, torch::kLong).to(x.device());
  return x.index_select(1, *index);
}

std::pair<int64_t, int64_t> Retained(const KvSegment& s, int64_t next) {
  const auto& p = s.positions;
  int64_t a = 0, b = 0;
  while (a < s.entries && p[size_t(a)] < s.sink) ++a;
  while (b < s.entries - a && p[size_t(s.entries - 1 - b)] > next - s.recent) ++b;
  return {a, b};
}

void Regrow(torch::Tensor* buf, int64_t entries, int64_t capacity, const torch::Tensor& like) {
  torch::Tensor grown =
      torch::zeros({like.size(0), like.size(1), capacity, like.size(3)}, like.options());
  if (entries > 0) grown.narrow(2, 0, entries).copy_(buf->narrow(2, 0, entries));
  *buf = grown;
}

int64_t Reserve(torch::Tensor* buf, int64_t entries, const torch::Tensor& like) {
  const int64_t T = like.size(2);
  const bool alike = buf->defined() && buf->size(0) == like.size(0) &&
                     buf->size(1) == like.size(1) && buf->size(3) == like.size(3) &&
                     buf->scalar_type() == like.scalar_type();
  if (!alike) entries = 0;
  if (!alike || buf->size(2) < entries + T)
    Regrow(buf, entries, std::max<int64_t>({64, entries + T, alike ? 2 * buf->size(2) : 0}), like);
  return entries;
}

void NoteAppended(KvSegment* seg, int64_t first, int64_t T) {
  seg->entries += T;
  if (seg->bounded)
    for (int64_t t = 0; t < T; ++t) seg->positions.push_back(first + t);
}

namespace {

// A head's retention need: full (-1, -1) or bounded (sink, R), keeping positions p < sink
// and p > next - R before position `next`.
std::pair<int64_t, int64_t> Retention(const HeadState& s) {
  // Per-chunk eviction (AoH §5) keeps the `recent` newest keys, p >= next - recent.
  if (s.mode == HeadMode::kStreaming) return {s.sink, s.chunk > 0 ? s.recent + 1 : s.recent};
  if (s.mode == HeadMode::kLocal) return {0, s.window};  // q - W < k  <=>  q - k < W
  return {-1, -1};
}

// Evicted entries a bounded segment may keep before it is compacted (KvDecoder::Evict).
constexpr int64_t kEvictSlack = 64;

// The entries of `s` that count as cached before position `next`: all of a full segment,
// the retained ones of a bounded segment (evicted ones awaiting compaction excluded).
int64_t LiveEntries(const KvSegment& s, int64_t next) {
  if (!s.bounded) return s.entries;
  const auto [a, b] = Retained(s, next);
  return a + b;
}

#if HEADLAB_TORCH_CUDA  // the fused path only (KvDecoder::Blocks)
// The fused path's BlockImpl::Mlp: each linear layer through Linear (a decode step's on one
// kernel, fc's activation in it): proj(act(fc(h))), or SwiGLU proj(silu(gate(h)) * fc(h)).
// An activation not named here is BlockImpl::Mlp's alone: the block computes it.
torch::Tensor Mlp(BlockImpl* b, const std::string& act, const torch::Tensor& h) {
  if (act == "swiglu") return Linear(b->proj, F::silu(Linear(b->gate, h)) * Linear(b->fc, h));
  if (act == "gelu") return Linear(b->proj, Linear(b->fc, h, DecodeActivation::kGelu));
  if (act == "gelu_tanh") return Linear(b->proj, Linear(b->fc, h, DecodeActivation::kGeluTanh));
  return b->Mlp(h);
}
#endif

BlockImpl* BlockAt(GptImpl* model, int64_t layer) {
  return model->blocks->ptr(size_t(layer))->as<Block>();
}

// Writes fresh [B, n, T, d] after the first `entries` positions of *buf (Reserve).
void AppendTo(torch::Tensor* buf, int64_t entries, const torch::Tensor& fresh) {
  buf->narrow(2, Reserve(buf, entries, fresh), fresh.size(2)).copy_(fresh);
}

// Keeps positions [0, a) and [entries - b, entries) of *buf, moved to [0, a + b).
void KeepEnds(torch::Tensor* buf, int64_t entries, int64_t a, int64_t b) {
  if (b <= 0 || a + b >= entries) return;
  const torch::Tensor kept = buf->narrow(2, entries - b, b);
  // One copy when the two ranges do not overlap (a chunk's eviction), else through a clone.
  buf->narrow(2, a, b).copy_(entries - b >= a + b ? kept : kept.clone());
}

}  // namespace

int64_t KvSegment::lead() const {
  if (!bounded) return entries;
  int64_t a = 0;
  while (a < entries && positions[size_t(a)] == a) ++a;
  return a;
}

int64_t KvSegment::tail_start() const {
  const int64_t a = lead();
  if (a == entries) return entries;
  // The recent run is contiguous: eviction removes one middle run (Evict), appends extend it.
  TORCH_CHECK(positions.back() - positions[size_t(a)] == entries - a - 1,
              "decoder: bounded positions are not a sink run and one recent run");
  return positions[size_t(a)];
}

const char* DecoderPathLabel(const GptImpl& model, const torch::Device& device,
                             const DecoderOptions& options) {
  const ModelConfig& c = model.config();
  const int64_t d = c.width / c.heads;
  bool fused = device.is_cuda() && options.path != DecodePath::kReference &&
               options.anchor_block <= 1 && (d == 64 || d == 128) && c.heads / c.kv_heads <= 16;
#if HEADLAB_TORCH_CUDA
  // The fused paths run prefill chunks through PyTorch's fused attention (LibTorch >= 2).
  fused = fused && kernels::DecodeAttentionAvailable() && HEADLAB_HAVE_SDPA;
#else
  fused = false;
#endif
  if (!fused) return kDecoderReferenceLabel;
  return options.path == DecodePath::kGraph ? kDecoderGraphLabel : kDecoderFusedLabel;
}

KvDecoder::KvDecoder(GptImpl* model, const DecoderOptions& options)
    : model_(model), options_(options) {}

KvDecoder::~KvDecoder() = default;

StatusOr<std::unique_ptr<KvDecoder>> KvDecoder::Create(GptImpl* model,
                                                       const DecoderOptions& options) {
  const ModelConfig& c = model->config();
  if (options.prefill_chunk < 1) return Status::InvalidArgument("prefill_chunk: expected >= 1");
  if (options.anchor_block > 1) {
    if (options.anchor_topk < 1) return Status::InvalidArgument("anchor_topk: expected >= 1");
    bool shaped = int64_t(options.anchor_map.size()) == c.layers;
    for (const auto& row : options.anchor_map) shaped = shaped && int64_t(row.size()) == c.heads;
    if (!shaped) return Status::InvalidArgument("anchor_map: expected [layers][heads]");
  }
  std::unique_ptr<KvDecoder> d(new KvDecoder(model, options));
  const std::string label = DecoderPathLabel(*model, model->wte->weight.device(), options);
  d->fused_ = label != kDecoderReferenceLabel;
  d->graph_ = label == kDecoderGraphLabel;
  const int64_t group = c.heads / c.kv_heads;
  for (int64_t l = 0; l < c.layers; ++l) {
    d->states_.push_back(model->attention(l)->head_states());
    std::vector<KvSegment> segments;
    std::map<std::pair<int64_t, int64_t>, size_t> by_policy;
    for (int64_t j = 0; j < c.kv_heads; ++j) {
      bool cached = false, same = true;
      std::pair<int64_t, int64_t> policy{-1, -1};
      for (int64_t h = j * group; h < (j + 1) * group; ++h) {
        const HeadState& s = d->states_.back()[size_t(h)];
        if (s.mode == HeadMode::kFixed)
          return Status::InvalidArgument("layer " + std::to_string(l) + " head " +
                                         std::to_string(h) +
                                         ": fixed heads have no decode path here");
        if (s.mode == HeadMode::kPruned) continue;
        if (cached && Retention(s) != policy) same = false;
        if (!cached) policy = Retention(s);
        cached = true;
      }
      if (!cached) continue;  // read only by pruned heads
      if (!same) policy = {-1, -1};
      auto it = by_policy.find(policy);
      if (it == by_policy.end()) {
        KvSegment seg;
        seg.bounded = policy.first >= 0;
        seg.sink = std::max<int64_t>(policy.first, 0);
        seg.recent = std::max<int64_t>(policy.second, 0);
        it = by_policy.emplace(policy, segments.size()).first;
        segments.push_back(seg);
      }
      segments[it->second].kv_heads.push_back(j);
    }
    d->layers_.push_back(std::move(segments));
  }
  return d;
}

void KvDecoder::Reset() {
  for (auto& layer : layers_)
    for (KvSegment& s : layer) {  // the buffers stay allocated (and a captured step valid)
      s.entries = 0;
      s.positions.clear();
      s.ring = 0;
    }
  selected_.clear();
  selected_valid_.clear();
  position_ = 0;
}

int64_t KvDecoder::KvBytes() const {
  int64_t bytes = 0;
  for (const auto& layer : layers_)
    for (const KvSegment& s : layer)
      if (s.k_buf.defined())
        bytes += 2 * LiveEntries(s, position_) * (s.k_buf.numel() / s.k_buf.size(2)) *
                 s.k_buf.element_size();
  return bytes;
}

int64_t KvDecoder::KvCapacityBytes() const {
  int64_t bytes = 0;
  for (const auto& layer : layers_)
    for (const KvSegment& s : layer)
      if (s.k_buf.defined()) bytes += 2 * int64_t(s.k_buf.numel() * s.k_buf.element_size());
  return bytes;
}

int64_t KvDecoder::KvEntries(int64_t layer, int64_t kv_head) const {
  for (const KvSegment& s : layers_[size_t(layer)])
    for (int64_t j : s.kv_heads)
      if (j == kv_head) return LiveEntries(s, position_);
  return 0;
}

void KvDecoder::Evict(int64_t next) {
  for (auto& layer : layers_) {
    for (KvSegment& s : layer) {
      if (!s.bounded) continue;
      const auto [a, b] = Retained(s, next);
      if (a + b == s.entries) continue;
      // A ring overwrites evicted slots itself (the bookkeeping below is all it needs); a
      // flat buffer moves its kept ends together.
      if (s.ring == 0) {
        // With the decode kernel (CUDA), evicted entries may stay a while: they sit in the
        // recent run's leading slots, which no head's visible span reaches (and the
        // reference's masks refuse), so compacting every kEvictSlack steps instead of every
        // step saves four copies per bounded segment and step. The buffer never grows for
        // them.
        if (fused_ && s.entries - (a + b) < kEvictSlack && s.entries < s.k_buf.size(2)) continue;
        KeepEnds(&s.k_buf, s.entries, a, b);
        KeepEnds(&s.v_buf, s.entries, a, b);
      }
      s.positions.erase(s.positions.begin() + a, s.positions.end() - b);
      s.entries = a + b;
    }
  }
}

void KvDecoder::Append(int64_t layer, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t first = position_, T = k.size(2);
  for (KvSegment& seg : layers_[size_t(layer)]) {
    AppendTo(&seg.k_buf, seg.entries, SelectHeads(k, seg.kv_heads, &seg.kv_index));
    AppendTo(&seg.v_buf, seg.entries, SelectHeads(v, seg.kv_heads, &seg.kv_index));
    NoteAppended(&seg, first, T);
  }
}

void KvDecoder::AppendAt(int64_t layer, const torch::Tensor& k, const torch::Tensor& v,
                         const torch::Tensor& qpos) {
  for (KvSegment& seg : layers_[size_t(layer)]) {
    torch::Tensor slot = qpos;  // a full segment: slot = position
    if (seg.ring > 0) {         // one slot tensor per ring shape and step, shared by the layers
      torch::Tensor& ring_slot = ring_slots_[{seg.sink, seg.ring}];
      if (!ring_slot.defined())
        ring_slot =
            torch::where(qpos < seg.sink, qpos, (qpos - seg.sink).remainder(seg.ring) + seg.sink);
      slot = ring_slot;
    }
    seg.k_buf.index_copy_(2, slot,
                          SelectHeads(k, seg.kv_heads, &seg.kv_index).to(seg.k_buf.scalar_type()));
    seg.v_buf.index_copy_(2, slot,
                          SelectHeads(v, seg.kv_heads, &seg.kv_index).to(seg.v_buf.scalar_type()));
  }
}

torch::Tensor KvDecoder::Blocks(const torch::Tensor& tokens, const torch::Tensor& qpos) {
  const ModelConfig& c = model_->config();
  torch::Tensor x = model_->Embed(tokens, qpos);
  ChunkRope rope;
  ring_slots_.clear();
#if HEADLAB_TORCH_CUDA
  if (weights_in_ && x.is_cuda() && x.scalar_type() == torch::kFloat &&
      kernels::AddNormAvailable()) {
    // The captured step and the fused path's prefill chunks: each residual add and the norm
    // after it as one kernel, whose output is already in the dtype the next GEMM reads
    // (add_norm.h), instead of an fp32 add, an fp32 norm and autocast's cast; the same blocks.
    const torch::ScalarType dtype = ActivationDtype(x);
    auto add_norm = [&](const torch::Tensor& delta, const Norm& norm) {
      return kernels::AddNormInto(&x, delta, norm->weight, norm->bias, norm->rms(), norm->eps(),
                                  dtype);
    };
    x = x.contiguous();
    torch::Tensor h = add_norm(torch::Tensor(), BlockAt(model_, 0)->ln1);
    for (int64_t l = 0; l < c.layers; ++l) {
      BlockImpl* b = BlockAt(model_, l);
      h = add_norm(Attention(l, h, qpos, &rope), b->ln2);
      const torch::Tensor m = Mlp(b, c.mlp_act, h);
      if (l + 1 < c.layers) {
        h = add_norm(m, BlockAt(model_, l + 1)->ln1);
      } else {
        x.add_(m);
      }
    }
    return x;
  }
#endif
  for (int64_t l = 0; l < c.layers; ++l) {
    BlockImpl* b = BlockAt(model_, l);
    x = x + Attention(l, b->ln1(x), qpos, &rope);
    x = x + b->Mlp(b->ln2(x));
  }
  return x;
}

torch::Tensor KvDecoder::Chunk(const torch::Tensor& tokens, bool last_only) {
  const int64_t T = tokens.size(1);
  CheckFits(T);
  LeaveRings();
  AutocastScope autocast(model_->precision(), tokens.device());  // as GptImpl::forward
  torch::Tensor qpos =
      torch::arange(position_, position_ + T, torch::dtype(torch::kLong).device(tokens.device()));
  // On the fused path the chunk reads the compute-dtype weights as the captured step does
  // (one q/k/v GEMM, add+norm kernels, no casts); the reference path keeps autocast's.
  std::shared_ptr<const ComputeWeights> w;
  if (fused_ && tokens.is_cuda() && !torch::GradMode::is_enabled()) w = Weights();
  torch::Tensor x;
  {
    std::optional<ComputeWeightsIn> swapped;
    if (w) swapped.emplace(*w);
    WeightsScope reading(&weights_in_, w.get());
    x = Blocks(tokens, qpos);
  }
  position_ += T;
  Evict(position_);
  if (last_only) x = x.narrow(1, T - 1, 1);
  return model_->Logits(x, w ? w->head : torch::Tensor());  // as GptImpl::forward: fp32 logits
}

void KvDecoder::CheckFits(int64_t T) const {
  const int64_t context = model_->config().context;
  if (model_->wpe)
    TORCH_CHECK(position_ + T <= context, "position ", position_ + T, " > context ", context);
}

void KvDecoder::Prefill(const torch::Tensor& tokens, const ChunkFn& on_chunk, bool last_only) {
  torch::NoGradGuard no_grad;
  const int64_t T = tokens.size(1);
  for (int64_t start = 0; start < T; start += options_.prefill_chunk) {
    const int64_t len = std::min(options_.prefill_chunk, T - start);
    const bool last = start + len == T;
    const int64_t first = position_;
    torch::Tensor logits = Chunk(tokens.narrow(1, start, len), last_only);
    if (!last_only) on_chunk(first, logits);
    if (last_only && last) on_chunk(position_ - 1, logits);
  }
}

torch::Tensor KvDecoder::Prefill(const torch::Tensor& tokens) {
  std::vector<torch::Tensor> parts;
  Prefill(tokens, [&](int64_t, const torch::Tensor& logits) { parts.push_back(logits); });
  return torch::cat(parts, 1);
}

torch::Tensor KvDecoder::Step(const torch::Tensor& token) {
  torch::NoGradGuard no_grad;
  if (graph_ && token.is_cuda()) {
    torch::Tensor logits = GraphStep(token.view({-1}));
    if (logits.defined()) return logits;  // else an empty cache: this step runs as a chunk
  }
  return Chunk(token.view({-1, 1}), /*last_only=*/false).squeeze(1);
}

}  // namespace headlab::decode
