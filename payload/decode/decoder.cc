// Chunked prefill and incremental decode with bounded streaming-head caches (AoH §5, J.3).
#include "payload/decode/decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "kernels/decode_linear.h"  // DecodeActivation
#include "payload/exec/attention_cuda.h"

#if HEADLAB_TORCH_CUDA
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/cuda.h>

#include "kernels/torch/add_norm_op.h"
#include "kernels/torch/decode_attention_op.h"
#include "kernels/torch/decode_linear_op.h"
#include "kernels/torch/hybrid_attention_op.h"
#include "kernels/torch/rope_append_op.h"
#endif

namespace headlab::decode {
namespace F = torch::nn::functional;
using kernels::DecodeActivation;

namespace {

// act(x W^T + bias): a decode step's few rows on one kernel (kernels/decode_linear.h) where
// it takes them, else LibTorch's linear (cuBLAS) and activation, as BlockImpl::Mlp applies it.
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                     DecodeActivation act = DecodeActivation::kNone) {
#if HEADLAB_TORCH_CUDA
  if (kernels::DecodeLinearFits(x, w)) return kernels::DecodeLinearOf(x, w, bias, act);
#endif
  torch::Tensor y = F::linear(x, w, bias);
  if (act == DecodeActivation::kGelu) return F::gelu(y);
  if (act == DecodeActivation::kGeluTanh)
    return F::gelu(y, F::GELUFuncOptions().approximate("tanh"));
  return y;
}

torch::Tensor Linear(const torch::nn::Linear& layer, const torch::Tensor& x,
                     DecodeActivation act = DecodeActivation::kNone) {
  return Linear(x, layer->weight, layer->bias, act);
}

}  // namespace

// RoPE for every layer of one chunk: cos' = (cos, cos) and sin' = (-sin, sin) [T, d] in the
// queries' dtype, so that RotaryEmbedding(x) = x * cos' + swap(x) * sin' (swap exchanges
// the halves): three kernels per rotated tensor instead of RotaryEmbedding's dozen, whose
// table computation a decode step would otherwise repeat for every layer.
struct ChunkRope {
  torch::Tensor cos, sin;
};

// A decode step captured as a CUDA graph (DecodePath::kGraph). The graph reads the step's
// token and position from static device tensors, writes the step's keys and values to the
// slots its position names, and leaves the logits in a static output; it stays valid while
// the batch size and every cache buffer are the ones it was captured with.
struct StepGraph {
#if HEADLAB_TORCH_CUDA
  at::cuda::CUDAGraph graph;
#endif
  torch::Tensor token;     // [B, 1] long, copied in before each replay
  torch::Tensor position;  // [1] long, filled before each replay
  torch::Tensor logits;    // [B, vocab] fp32, the captured output
  // Every segment's k_buf and v_buf and the decode kernel's counters at capture, held so
  // that their memory cannot come back under another shape while the graph exists.
  std::vector<torch::Tensor> buffers;
  // What the graph reads in place of the fp32 parameters (KvDecoder::Weights at capture).
  std::shared_ptr<const ComputeWeights> weights;
};

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

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A head's retention need: full (-1, -1) or bounded (sink, R), keeping positions p < sink
// and p > next - R before position `next`.
std::pair<int64_t, int64_t> Retention(const HeadState& s) {
  // Per-chunk eviction (AoH §5) keeps the `recent` newest keys, p >= next - recent.
  if (s.mode == HeadMode::kStreaming) return {s.sink, s.chunk > 0 ? s.recent + 1 : s.recent};
  if (s.mode == HeadMode::kLocal) return {0, s.window};  // q - W < k  <=>  q - k < W
  return {-1, -1};
}

#if HEADLAB_TORCH_CUDA  // the fused decode step's helper (FusedDecode)
// The state a decode step's kernel applies for `s`: a one-token call of a chunk-evicting
// streaming head sees k >= q - recent (attention.h AllowedKeysAt), per-token eviction's
// window of recent + 1.
HeadState DecodeStepState(HeadState s) {
  if (s.mode == HeadMode::kStreaming && s.chunk > 0) {
    s.recent += 1;
    s.chunk = 0;
  }
  return s;
}
#endif

// Returns x[:, heads] for x [B, h, T, d]: a view when `heads` is a contiguous run (the
// reordered layout of AoH §5), else a gather with the indices uploaded once into *index
// (an upload per call would wait for the device each time).
torch::Tensor SelectHeads(const torch::Tensor& x, const std::vector<int64_t>& heads,
                          torch::Tensor* index) {
  bool run = true;
  for (size_t i = 1; run && i < heads.size(); ++i) run = heads[i] == heads[0] + int64_t(i);
  if (run) return x.narrow(1, heads[0], int64_t(heads.size()));
  if (!index->defined() || index->device() != x.device())
    *index = torch::tensor(heads, torch::kLong).to(x.device());
  return x.index_select(1, *index);
}

// Makes *rope's tables [T, d] in `dtype` for positions qpos [T] (on qpos's device) unless it
// has them in that dtype. The tables come from RotaryEmbedding itself: it rotates the basis
// (1, .., 1, 0, .., 0) to (cos, sin), with the model's RoPE scaling and YaRN's factor in them.
void MakeRope(torch::ScalarType dtype, int64_t d, const RopeSpec& spec, const torch::Tensor& qpos,
              ChunkRope* rope) {
  if (rope->cos.defined() && rope->cos.scalar_type() == dtype) return;
  const int64_t T = qpos.size(0), half = d / 2;
  const auto opts = qpos.options().dtype(dtype);
  torch::Tensor basis = torch::cat({torch::ones({half}, opts), torch::zeros({half}, opts)});
  torch::Tensor cs =
      RotaryEmbedding(basis.expand({1, 1, T, 2 * half}), spec, qpos)[0][0];  // [T, d]
  torch::Tensor cos = cs.narrow(1, 0, half), sin = cs.narrow(1, half, half);
  rope->cos = torch::cat({cos, cos}, 1);
  rope->sin = torch::cat({-sin, sin}, 1);
}

// Rotates x [B, h, T, d] at positions qpos [T] as RotaryEmbedding does, making *rope on
// first use.
torch::Tensor Rotate(const torch::Tensor& x, const RopeSpec& spec, const torch::Tensor& qpos,
                     ChunkRope* rope) {
  const int64_t half = x.size(3) / 2;
  MakeRope(x.scalar_type(), x.size(3), spec, qpos, rope);
  torch::Tensor swapped = torch::cat({x.narrow(3, half, half), x.narrow(3, 0, half)}, 3);
  return torch::addcmul(x * rope->cos, swapped, rope->sin);
}

// Points *slot at `weights` for its lifetime (null again at its end, however it ends).
class WeightsScope {
 public:
  WeightsScope(const ComputeWeights** slot, const ComputeWeights* weights) : slot_(slot) {
    *slot_ = weights;
  }
  ~WeightsScope() { *slot_ = nullptr; }
  WeightsScope(const WeightsScope&) = delete;
  WeightsScope& operator=(const WeightsScope&) = delete;

 private:
  const ComputeWeights** slot_;
};

// Evicted entries a bounded segment may keep before it is compacted (KvDecoder::Evict).
constexpr int64_t kEvictSlack = 64;

// The entries of a bounded segment that AoH §5 retains before `next`: a leading run
// (p < sink) and a trailing run (keys p with next - p < recent, the recent window the next
// query can reach); everything between is evicted. Positions ascend.
std::pair<int64_t, int64_t> Retained(const KvSegment& s, int64_t next) {
  const auto& p = s.positions;
  int64_t a = 0, b = 0;
  while (a < s.entries && p[size_t(a)] < s.sink) ++a;
  while (b < s.entries - a && p[size_t(s.entries - 1 - b)] > next - s.recent) ++b;
  return {a, b};
}

// The entries of `s` that count as cached before position `next`: all of a full segment,
// the retained ones of a bounded segment (evicted ones awaiting compaction excluded).
int64_t LiveEntries(const KvSegment& s, int64_t next) {
  if (!s.bounded) return s.entries;
  const auto [a, b] = Retained(s, next);
  return a + b;
}

// The positions [L] of a segment's cached keys on `device`, made from its slot -> position
// map without an upload.
torch::Tensor SlotPositions(const KvSegment& seg, torch::Device device) {
  auto opts = torch::dtype(torch::kLong).device(device);
  const int64_t lead = seg.lead(), tail = seg.entries - lead;
  if (tail == 0) return torch::arange(lead, opts);
  return torch::cat(
      {torch::arange(lead, opts), torch::arange(seg.tail_start(), seg.tail_start() + tail, opts)});
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

// Replaces *buf by a zero-filled [B, n, capacity, d] buffer like `like`, keeping its first
// `entries` slots. Zero-filled: graph steps read slots they have not written yet (masked,
// but they must hold finite values: decode_attention.h).
void Regrow(torch::Tensor* buf, int64_t entries, int64_t capacity, const torch::Tensor& like) {
  torch::Tensor grown =
      torch::zeros({like.size(0), like.size(1), capacity, like.size(3)}, like.options());
  if (entries > 0) grown.narrow(2, 0, entries).copy_(buf->narrow(2, 0, entries));
  *buf = grown;
}

// Makes room in *buf for T = like.size(2) slots after its first `entries`, for data shaped
// like `like` [B, n, T, d], doubling its capacity when it is full (a new buffer also when the
// batch, heads or dtype differ, as after a Reset for another batch size: then nothing is
// kept). Returns the first slot of the room.
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

// Writes fresh [B, n, T, d] after the first `entries` positions of *buf (Reserve).
void AppendTo(torch::Tensor* buf, int64_t entries, const torch::Tensor& fresh) {
  buf->narrow(2, Reserve(buf, entries, fresh), fresh.size(2)).copy_(fresh);
}

// Records on the host that positions [first, first + T) were appended to *seg.
void NoteAppended(KvSegment* seg, int64_t first, int64_t T) {
  seg->entries += T;
  if (seg->bounded)
    for (int64_t t = 0; t < T; ++t) seg->positions.push_back(first + t);
}

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

#if HEADLAB_HAVE_SDPA  // the flash prefill chunks' helpers, here to FlashChunk
// Whether PyTorch's flash-attention kernel runs on `device`: compute capability 8.0 and
// later (Ampere, Hopper); elsewhere prefill chunks keep the masked memory-efficient path.
bool FlashKernelRuns(const torch::Device& device) {
#if HEADLAB_TORCH_CUDA
  return device.is_cuda() && at::cuda::getDeviceProperties(device.index())->major >= 8;
#else
  (void)device;
  return false;
#endif
}

// The attention of queries q [B, nH, T, d] over a segment's keys and values k, v [B, n, L, d]
// (nH a multiple of n: the flash kernel's own GQA, query head h reads KV head h / (nH / n))
// in ChunkForm `f`'s flash form, through PyTorch's flash kernel (its [B, T, heads, d] layout
// reached by transposed views); returns [B, nH, T, d]. The window and sink calls are
// merged by their log-sum-exps, o = o_w sigmoid(lse_w - lse_s) + o_s sigmoid(lse_s - lse_w)
// = lerp(o_s, o_w, sigmoid(lse_w - lse_s)), the weight rounded to the outputs' dtype (one
// kernel: 128 us per chunk and layer at B = 16, 6 heads, where the fp32 form took 166 us and
// the masked memory-efficient call over sink + recent + chunk 218; the same max difference
// from the masked call, 0.0039; scripts/gpu/prefill_breakdown.py's shapes).
torch::Tensor FlashChunk(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const ChunkForm& f, double scale) {
  const torch::Tensor qt = q.transpose(1, 2);
  const int64_t T = q.size(2);
  auto call = [&](int64_t s0, int64_t s1, bool causal, std::optional<int64_t> window_left) {
    const torch::Tensor kt = k.narrow(2, s0, s1 - s0).transpose(1, 2),
                        vt = v.narrow(2, s0, s1 - s0).transpose(1, 2);
    return at::_flash_attention_forward(
        qt, kt, vt, std::nullopt, std::nullopt, T, s1 - s0, /*dropout_p=*/0.0, causal,
        /*return_debug_mask=*/false, scale, window_left, std::nullopt);
  };
  auto window = call(f.w0, f.w1, /*causal=*/true,
                     f.recent > 0 ? std::optional<int64_t>(f.recent - 1) : std::nullopt);
  torch::Tensor o = std::get<0>(window);  // [B, T, nH, d]
  if (f.sink > 0) {
    auto sink = call(0, f.sink, /*causal=*/false, std::nullopt);
    const torch::Tensor w =
        torch::sigmoid(std::get<1>(window) - std::get<1>(sink)).transpose(1, 2).unsqueeze(-1);
    o = torch::lerp(std::get<0>(sink), o,
                    w.to(o.scalar_type()));  // o_s + w (o_w - o_s): one kernel
  }
  return o.transpose(1, 2);
}
#endif

#if HEADLAB_TORCH_CUDA
// The RoPE+append kernel's view of `seg` (rope_append_op.h): its buffers, KV heads and ring
// (0 for a full segment: slot = position).
kernels::AppendTarget AppendTargetOf(const KvSegment& seg) {
  kernels::AppendTarget t;
  t.k_buf = seg.k_buf;
  t.v_buf = seg.v_buf;
  for (int64_t j : seg.kv_heads) t.layer_kv_heads.push_back(int(j));
  t.sink = seg.sink;
  t.ring = seg.ring;
  return t;
}

// The attention of queries q [B, nH, T, d] over a segment's keys and values k, v [B, n, L, d]
// (GQA as the fused kernels have it: query head h reads KV head h / (nH / n)) in ChunkForm's
// fused frame of `length` (its w1) slots, through the fused hybrid kernels with each query
// head's `specs`; returns [B, nH, T, d]. The queries go to the last T rows of a zero-filled [B,
// length, nH, d] buffer; the keys and values are the cache's own slots, read in place through
// strided views.
torch::Tensor FusedChunk(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const std::vector<kernels::HeadSpec>& specs, int64_t length,
                         double scale) {
  const int64_t B = q.size(0), nH = q.size(1), T = q.size(2), d = q.size(3);
  const torch::Tensor qv = torch::zeros({B, length, nH, d}, q.options());
  qv.narrow(1, length - T, T).copy_(q.transpose(1, 2));
  kernels::HybridHeads heads;
  heads.specs = specs;
  const torch::Tensor o =
      kernels::HybridAttention(qv, k.narrow(2, 0, length).transpose(1, 2),
                               v.narrow(2, 0, length).transpose(1, 2), heads, scale);
  return o.narrow(1, length - T, T).transpose(1, 2);
}
#endif

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

ChunkForm ChunkFormOf(const HeadState& state, const KvSegment& segment, int64_t P, int64_t T) {
  const int64_t L = segment.entries, lead = segment.lead();
  // The run of positions that ends at the chunk's last query: every slot when the segment
  // is one run from position 0, else the recent run after the lead.
  const int64_t w0 = lead == L ? 0 : lead, first = lead == L ? 0 : segment.tail_start();
  if (T < 1 || first + (L - w0) != P + T) return {};
  ChunkForm f;
  f.w0 = w0;
  f.w1 = L;
  switch (state.mode) {
    case HeadMode::kOrdinary:  // every key up to the query: the run must start at 0
      f.flash = f.fused = first == 0;
      return f;
    case HeadMode::kLocal:  // keys q - W < p <= q, the oldest P - W + 1 (or 0) present
      f.recent = state.window;
      f.flash = f.fused = state.window >= 1 && first <= std::max<int64_t>(0, P - state.window + 1);
      return f;
    case HeadMode::kStreaming:
      if (state.chunk > 0) return {};  // per-chunk eviction: the masked reference
      f.recent = state.recent;
      f.sink = state.sink;
      f.fused = state.recent >= 1 && first <= std::max<int64_t>(0, P - state.recent + 1) &&
                (lead == L || lead >= state.sink);
      // The flash form's window call must not reach the sink slots (the merge counts a
      // key once).
      f.flash = f.fused && (state.sink == 0 || P - state.recent + 1 >= state.sink);
      return f;
    default:
      return {};
  }
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

torch::Tensor KvDecoder::FusedDecode(int64_t layer, const torch::Tensor& q,
                                     const torch::Tensor& qpos) {
#if HEADLAB_TORCH_CUDA
  const ModelConfig& c = model_->config();
  std::vector<kernels::HeadSpec> specs;
  for (const HeadState& s : states_[size_t(layer)])
    specs.push_back(KernelHeadSpec(DecodeStepState(s)));
  size_t covered = 0;  // KV heads with a segment: the kernel writes their query heads
  std::vector<kernels::DecodeSegment> segments;  // every segment of the layer, one launch
  for (KvSegment& seg : layers_[size_t(layer)]) {
    covered += seg.kv_heads.size();
    kernels::DecodeSegment ds;
    ds.k_buf = seg.k_buf;
    ds.v_buf = seg.v_buf;
    if (qpos.defined() && seg.ring > 0) {  // a captured step: the ring (decode_attention.h)
      ds.lead = seg.sink;
      ds.ring = seg.ring;
      ds.entries = seg.sink + seg.ring;
    } else if (qpos.defined()) {  // a captured step: every slot, the kernel stops at the query
      ds.entries = ds.lead = seg.k_buf.size(2);
    } else {
      ds.entries = seg.entries;
      ds.lead = seg.lead();
      ds.tail_start = seg.tail_start();
    }
    for (int64_t j : seg.kv_heads) ds.layer_kv_heads.push_back(int(j));
    segments.push_back(std::move(ds));
  }
  torch::Tensor o;  // heads of no segment (pruned) stay zero
  if (!segments.empty()) {
    const torch::Tensor qs =
        q.select(2, 0).to(segments[0].k_buf.scalar_type());  // [B, H, d], strided
    o = covered == size_t(c.kv_heads) ? torch::empty_like(qs) : torch::zeros_like(qs);
    kernels::DecodeAttentionInto(qs, segments, specs, c.kv_heads, position_,
                                 1.0 / std::sqrt(double(q.size(3))), &o, qpos,
                                 DecodeCounts(q.size(0), q.device()));
  }
  if (!o.defined()) o = torch::zeros({q.size(0), q.size(1), q.size(3)}, q.options());
  return o;
#else
  (void)layer, (void)qpos;
  TORCH_CHECK(false, "decoder: this build has no decode kernel");
  return q;
#endif
}

const torch::Tensor& KvDecoder::DecodeCounts(int64_t batch, const torch::Device& device) {
  const int64_t ints = batch * model_->config().kv_heads;
  if (!decode_counts_.defined() || decode_counts_.device() != device ||
      decode_counts_.numel() < ints) {
    TORCH_CHECK(!capturing_, "decoder: the decode counters must exist before a step is captured");
    decode_counts_ = torch::zeros({ints}, torch::dtype(torch::kInt).device(device));
  }
  return decode_counts_;
}

torch::Tensor KvDecoder::Attention(int64_t layer, const torch::Tensor& x, const torch::Tensor& qpos,
                                   ChunkRope* rope) {
  const ModelConfig& c = model_->config();
  HybridAttention& attn = model_->attention(layer);
  const int64_t B = x.size(0), T = x.size(1), H = c.heads, KV = c.kv_heads;
  const int64_t d = attn->head_dim(), group = H / KV;
  // [B, H | KV, T, d], with the layer's biases and q/k norms as its forward has them. x is
  // cast to the compute dtype once here, not by autocast in each of the three projections.
  const torch::Tensor xc = x.to(ActivationDtype(x));
  torch::Tensor q, k, v;
  const torch::Tensor qkv = weights_in_ ? weights_in_->Qkv(layer, xc) : torch::Tensor();
  bool appended = false;  // the chunk's keys and values are in the cache
#if HEADLAB_TORCH_CUDA
  if (capturing_ && qkv.defined() && kernels::RopeAppendAvailable()) {
    // The captured step: one kernel rotates q and k and appends k and v to every segment at
    // the slot of the device position (rope_append.h), then the decode kernel.
    std::vector<kernels::AppendTarget> targets;
    for (const KvSegment& seg : layers_[size_t(layer)]) targets.push_back(AppendTargetOf(seg));
    // RoPE from the row of the device position in tables of every position (made before
    // the capture), not tables made per step from it.
    q = kernels::RopeAppendInto(qkv.select(2, 0), H, KV, step_cos_, step_sin_, targets, qpos)
            .unsqueeze(2);  // [B, H, 1, d]
    return Linear(attn->o_proj, FusedDecode(layer, q, qpos).reshape({B, T, H * d}));
  }
  if (!capturing_ && qkv.defined() && T > 1 && kernels::RopeAppendAvailable()) {
    // A prefill chunk: one kernel rotates q and k and appends k and v to every segment from
    // its next slot (rope_append.h), instead of three kernels per rotated tensor and two
    // copies per segment.
    torch::Tensor cos, sin;
    if (c.pos == "rope") {
      MakeRope(qkv.scalar_type(), qkv.size(3), c.Rope(), qpos, rope);
      cos = rope->cos;
      sin = rope->sin;
    }
    std::vector<kernels::AppendTarget> targets;
    for (KvSegment& seg : layers_[size_t(layer)]) {
      const torch::Tensor like = qkv.narrow(1, H, int64_t(seg.kv_heads.size()));  // [B, n, T, d]
      const int64_t first_slot = Reserve(&seg.k_buf, seg.entries, like);
      Reserve(&seg.v_buf, seg.entries, like);
      targets.push_back(AppendTargetOf(seg));  // the linear layout here (LeaveRings)
      targets.back().first_slot = first_slot;
    }
    q = kernels::RopeAppendChunkInto(qkv.transpose(1, 2), H, KV, cos, sin, targets)
            .transpose(1, 2);  // [B, H, T, d]
    for (KvSegment& seg : layers_[size_t(layer)]) NoteAppended(&seg, position_, T);
    appended = true;
  }
#endif
  if (!appended) {
    if (qkv.defined()) {  // one GEMM, q and k rotated together
      torch::Tensor qk = qkv.narrow(1, 0, H + KV);
      if (c.pos == "rope") qk = Rotate(qk, c.Rope(), qpos, rope);
      q = qk.narrow(1, 0, H);
      k = qk.narrow(1, H, KV);
      v = qkv.narrow(1, H + KV, KV);
    } else {
      q = attn->Queries(xc), k = attn->Keys(xc), v = attn->Values(xc);
      TORCH_CHECK(q.size(1) == H && k.size(1) == KV, "the decoder needs every head (none removed)");
      if (c.pos == "rope") {
        q = Rotate(q, c.Rope(), qpos, rope);
        k = Rotate(k, c.Rope(), qpos, rope);
      }
    }
  }
  if (capturing_) {  // the captured decode step (GraphStep): no host position in it
    AppendAt(layer, k, v, qpos);
    return Linear(attn->o_proj, FusedDecode(layer, q, qpos).reshape({B, T, H * d}));
  }
  if (!appended) Append(layer, k, v);
  if (fused_ && T == 1 && x.is_cuda())  // a decode step: the split-K kernel (DecoderPathLabel)
    return Linear(attn->o_proj, FusedDecode(layer, q, torch::Tensor()).reshape({B, T, H * d}));
  const bool reuse_on = options_.anchor_block > 1;
  const bool anchor = reuse_on && layer % options_.anchor_block == 0;
  const bool reuse = reuse_on && !anchor;
  if (anchor) {
    selected_.assign(size_t(H), torch::Tensor());
    selected_valid_.assign(size_t(H), torch::Tensor());
  }
  const std::vector<HeadState>& states = states_[size_t(layer)];
  // o_proj's input [B, T, H, d]: each segment's heads written into their places (heads of no
  // segment, read only by pruned heads, stay zero); a single segment of every head in order
  // is its attention's output itself, no copy (the flash and fused kernels write [B, T, H, d]).
  const std::vector<KvSegment>& segments = layers_[size_t(layer)];
  size_t covered = 0;
  for (const KvSegment& seg : segments) covered += seg.kv_heads.size();
  bool in_order = segments.size() == 1 && covered == size_t(KV);
  for (size_t i = 0; in_order && i < segments[0].kv_heads.size(); ++i)
    in_order = segments[0].kv_heads[i] == int64_t(i);
  torch::Tensor merged;
  for (const KvSegment& seg : segments) {
    const int64_t n = int64_t(seg.kv_heads.size());
    const int64_t L = seg.entries;
    const torch::Tensor seg_k = seg.k(), seg_v = seg.v();

    std::vector<int64_t> heads;  // query heads reading this segment, [n * group]
    bool uniform = true;         // every head of the segment in one state: one broadcast mask
    for (int64_t j : seg.kv_heads)
      for (int64_t h = j * group; h < (j + 1) * group; ++h) {
        heads.push_back(h);
        const HeadState &a = states[size_t(h)], &b = states[size_t(heads[0])];
        uniform = uniform && a.mode == b.mode && a.window == b.window && a.sink == b.sink &&
                  a.recent == b.recent && a.chunk == b.chunk;
      }
    torch::Tensor q_index;  // the reference path uploads a gather's indices per call
    torch::Tensor qs = SelectHeads(q, heads, &q_index).reshape({B, n, group, T, d});
    // Read by the fused and SDPA paths only (HEADLAB_TORCH_CUDA, HEADLAB_HAVE_SDPA builds).
    [[maybe_unused]] const double scale = 1.0 / std::sqrt(double(d));
    torch::Tensor out;  // [B, n, g, T, d]
    // The fused paths' prefill chunks (DecoderPathLabel) run fused kernels instead of the
    // [B, n, g, T, L] scores below, which the reference path keeps as the independent answer
    // and anchor-reuse keeps for its top-k. Heads in one state: a bounded segment (local and
    // streaming heads, whose slots are few) through the fused hybrid kernel in ChunkFormOf's
    // fused frame, the sink and the window in one launch; where that frame is not short
    // (at most 4 T slots: its padding rows are computed too) or not available, the flash
    // kernel with no mask where ChunkFormOf's flash form expresses the keys (ordinary heads over a
    // full segment: its lower-right causal mask; local and streaming heads: its causal window, plus
    // the sink slots in a second call); the rest through the memory-efficient kernel reading a
    // boolean mask.
    [[maybe_unused]] const bool fused_chunk =
        HEADLAB_HAVE_SDPA && fused_ && !reuse_on && qs.is_cuda();
    [[maybe_unused]] const ChunkForm form =
        fused_chunk && uniform ? ChunkFormOf(states[size_t(heads[0])], seg, position_, T)
                               : ChunkForm{};
#if HEADLAB_TORCH_CUDA
    if (form.fused && seg.bounded && form.w1 <= 4 * T && seg_k.scalar_type() == qs.scalar_type()) {
      std::vector<kernels::HeadSpec> specs;
      for (int64_t h : heads) specs.push_back(KernelHeadSpec(states[size_t(h)]));
      out = FusedChunk(qs.reshape({B, n * group, T, d}), seg_k, seg_v, specs, form.w1, scale)
                .reshape({B, n, group, T, d});
    }
#endif
#if HEADLAB_HAVE_SDPA
    if (!out.defined() && form.flash && FlashKernelRuns(qs.device()) && d % 8 == 0 && d <= 256 &&
        seg_k.scalar_type() == qs.scalar_type() &&
        (qs.scalar_type() == torch::kBFloat16 || qs.scalar_type() == torch::kHalf))
      out = FlashChunk(qs.reshape({B, n * group, T, d}), seg_k, seg_v, form, scale)
                .reshape({B, n, group, T, d});
#endif
    if (!out.defined()) {
      const torch::Tensor kpos =
          SlotPositions(seg, x.device());  // [L] positions of the cached keys
      torch::Tensor allowed;               // [1, n | 1, group | 1, T, L]
      if (uniform) {
        allowed =
            AllowedKeysAt(states[size_t(heads[0])], qpos, kpos, position_).view({1, 1, 1, T, L});
      } else {
        std::vector<torch::Tensor> masks;
        for (int64_t h : heads)
          masks.push_back(AllowedKeysAt(states[size_t(h)], qpos, kpos, position_));
        allowed = torch::stack(masks).view({1, n, group, T, L});
      }
      if (reuse && !seg.bounded) {
        // App. J.2: a reuse retrieval head attends to its own K/V at the positions its
        // anchor head selected. Full segments hold every position, so position = index.
        allowed = allowed.expand({B, n, group, T, L}).clone();
        for (size_t i = 0; i < heads.size(); ++i) {
          int64_t a = options_.anchor_map[size_t(layer)][size_t(heads[i])];
          if (a < 0 || states[size_t(heads[i])].mode != HeadMode::kOrdinary ||
              !selected_.at(size_t(a)).defined())
            continue;
          torch::Tensor picked =
              torch::zeros({B, T, L}, torch::dtype(torch::kFloat).device(x.device()));
          picked.scatter_add_(2, selected_[size_t(a)], selected_valid_[size_t(a)]);
          torch::Tensor slot = allowed.select(1, int64_t(i) / group).select(1, int64_t(i) % group);
          slot.copy_(slot & (picked > 0));
        }
      }
#if HEADLAB_HAVE_SDPA
      if (fused_chunk) {
        auto heads_of = [&](const torch::Tensor& t,
                            int64_t rows) {  // [b, n | 1, g | 1, rows, w] -> [b, n g, rows, w]
          return t.expand({t.size(0), n, group, rows, t.size(4)})
              .reshape({t.size(0), n * group, rows, t.size(4)});
        };
        out = at::scaled_dot_product_attention(
                  qs.reshape({B, n * group, T, d}), heads_of(seg_k.unsqueeze(2), L),
                  heads_of(seg_v.unsqueeze(2), L), heads_of(allowed, T), 0.0,
                  /*is_causal=*/false, scale)
                  .reshape({B, n, group, T, d});
      }
#endif
      if (!out.defined()) {
        torch::Tensor scores =
            torch::matmul(qs, seg_k.unsqueeze(2).transpose(-2, -1)) / std::sqrt(double(d));
        scores = scores.masked_fill(allowed.logical_not(), kNegInf);  // [B, n, group, T, L]
        if (anchor) {
          // App. J.2: anchor retrieval heads pick their top-k keys per query by score.
          const int64_t topk = std::min(options_.anchor_topk, L);
          for (size_t i = 0; i < heads.size(); ++i) {
            if (states[size_t(heads[i])].mode != HeadMode::kOrdinary || seg.bounded) continue;
            auto top =
                scores.select(1, int64_t(i) / group).select(1, int64_t(i) % group).topk(topk, -1);
            torch::Tensor values = std::get<0>(top), index = std::get<1>(top);  // [B, T, topk]
            selected_[size_t(heads[i])] = index;  // full segment: index = position
            selected_valid_[size_t(heads[i])] = (values > kNegInf).to(torch::kFloat);
          }
        }
        out = torch::matmul(torch::softmax(scores, -1), seg_v.unsqueeze(2));
      }
    }
    const torch::Tensor seg_out =
        out.reshape({B, n * group, T, d}).transpose(1, 2);  // [B, T, n g, d]
    if (in_order) {
      merged = seg_out;
      continue;
    }
    if (!merged.defined())
      merged = covered == size_t(KV) ? torch::empty({B, T, H, d}, seg_out.options())
                                     : torch::zeros({B, T, H, d}, seg_out.options());
    for (size_t i = 0; i < heads.size();) {  // one copy per run of consecutive heads
      size_t e = i + 1;
      while (e < heads.size() && heads[e] == heads[i] + int64_t(e - i)) ++e;
      merged.narrow(2, heads[i], int64_t(e - i))
          .copy_(seg_out.narrow(2, int64_t(i), int64_t(e - i)));
      i = e;
    }
  }
  if (!merged.defined()) merged = torch::zeros({B, T, H, d}, xc.options());
  for (int64_t h = 0; h < H; ++h)  // pruned heads contribute nothing
    if (states[size_t(h)].mode == HeadMode::kPruned) merged.select(2, h).zero_();
  return attn->o_proj(merged.reshape({B, T, H * d}));
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

void KvDecoder::CheckFits(int64_t T) const {
  const int64_t context = model_->config().context;
  if (model_->wpe)
    TORCH_CHECK(position_ + T <= context, "position ", position_ + T, " > context ", context);
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
