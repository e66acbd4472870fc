// A layer's attention in the decoder (KvDecoder::Attention): the chunk's queries, keys and
// values, appended to the cache, then a decode step on the split-K decode kernel
// (FusedDecode), a prefill chunk on the fused or flash kernels where ChunkFormOf allows
// (AoH §5), or the reference with masks and anchor-reuse (App. J.2).
#include "payload/decode/decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "payload/decode/decoder_internal.h"
#include "payload/exec/attention_cuda.h"

#if HEADLAB_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "kernels/torch/decode_attention_op.h"
#include "kernels/torch/hybrid_attention_op.h"
#include "kernels/torch/rope_append_op.h"
#endif

namespace headlab::decode {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

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

// Rotates x [B, h, T, d] at positions qpos [T] as RotaryEmbedding does, making *rope on
// first use.
torch::Tensor Rotate(const torch::Tensor& x, const RopeSpec& spec, const torch::Tensor& qpos,
                     ChunkRope* rope) {
  const int64_t half = x.size(3) / 2;
  MakeRope(x.scalar_type(), x.size(3), spec, qpos, rope);
  torch::Tensor swapped = torch::cat({x.narrow(3, half, half), x.narrow(3, 0, half)}, 3);
  return torch::addcmul(x * rope->cos, swapped, rope->sin);
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

#if HEADLAB_TORCH_CUDA
// A prefill chunk's queries [B, H, T, d] from qkv [B, H + 2 KV, T, d] (ComputeWeights::Qkv)
// at positions qpos [T] from `position`: one kernel rotates q and k and appends k and v to
// every one of *segments from its next slot (rope_append.h), instead of three kernels per
// rotated tensor and two copies per segment.
torch::Tensor RopeAppendChunk(const ModelConfig& c, const torch::Tensor& qkv,
                              const torch::Tensor& qpos, int64_t position, ChunkRope* rope,
                              std::vector<KvSegment>* segments) {
  const int64_t H = c.heads, KV = c.kv_heads, T = qkv.size(2);
  torch::Tensor cos, sin;
  if (c.pos == "rope") {
    MakeRope(qkv.scalar_type(), qkv.size(3), c.Rope(), qpos, rope);
    cos = rope->cos;
    sin = rope->sin;
  }
  std::vector<kernels::AppendTarget> targets;
  for (KvSegment& seg : *segments) {
    const torch::Tensor like = qkv.narrow(1, H, int64_t(seg.kv_heads.size()));  // [B, n, T, d]
    const int64_t first_slot = Reserve(&seg.k_buf, seg.entries, like);
    Reserve(&seg.v_buf, seg.entries, like);
    targets.push_back(AppendTargetOf(seg));  // the linear layout here (LeaveRings)
    targets.back().first_slot = first_slot;
  }
  const torch::Tensor q =
      kernels::RopeAppendChunkInto(qkv.transpose(1, 2), H, KV, cos, sin, targets)
          .transpose(1, 2);  // [B, H, T, d]
  for (KvSegment& seg : *segments) NoteAppended(&seg, position, T);
  return q;
}
#endif

// The layer's queries, keys and values [B, H | KV, T, d] of xc [B, T, C] (in the compute
// dtype) at positions qpos [T], rotated with RoPE: from qkv (ComputeWeights::Qkv) where it
// is defined, else from the layer's own projections.
void Project(const ModelConfig& c, HybridAttention& attn, const torch::Tensor& xc,
             const torch::Tensor& qkv, const torch::Tensor& qpos, ChunkRope* rope, torch::Tensor* q,
             torch::Tensor* k, torch::Tensor* v) {
  const int64_t H = c.heads, KV = c.kv_heads;
  if (qkv.defined()) {  // one GEMM, q and k rotated together
    torch::Tensor qk = qkv.narrow(1, 0, H + KV);
    if (c.pos == "rope") qk = Rotate(qk, c.Rope(), qpos, rope);
    *q = qk.narrow(1, 0, H);
    *k = qk.narrow(1, H, KV);
    *v = qkv.narrow(1, H + KV, KV);
    return;
  }
  *q = attn->Queries(xc), *k = attn->Keys(xc), *v = attn->Values(xc);
  TORCH_CHECK(q->size(1) == H && k->size(1) == KV, "the decoder needs every head (none removed)");
  if (c.pos == "rope") {
    *q = Rotate(*q, c.Rope(), qpos, rope);
    *k = Rotate(*k, c.Rope(), qpos, rope);
  }
}

// What a layer's attention over its cached segments reads on the reference path and in the
// fused paths' prefill chunks (KvDecoder::Attention past the append; ChunkAttention).
struct LayerChunk {
  const std::vector<HeadState>& states;  // the layer's head states
  const DecoderOptions& options;
  int64_t layer = 0;
  int64_t position = 0;       // the chunk's first query position (the decoder's position)
  int64_t group = 0;          // query heads per KV head (GQA)
  const torch::Tensor& qpos;  // [T]: the chunk's query positions on the device
  // The fused paths' prefill chunks (DecoderPathLabel): fused kernels in place of the scores.
  bool fused_chunk = false;
  // App. J.2: this layer's anchor heads pick their top-k keys into *selected (and
  // *selected_valid); a reuse layer's retrieval heads read them.
  bool anchor = false, reuse = false;
  std::vector<torch::Tensor>* selected;
  std::vector<torch::Tensor>* selected_valid;
};

// The attention [B, n, group, T, d] of one segment's query heads `heads` (qs [B, n, group, T,
// d]) without a mask, where ChunkFormOf gives a form for them; else undefined.
torch::Tensor UnmaskedSegment(const LayerChunk& lc, const KvSegment& seg, const torch::Tensor& qs,
                              const std::vector<int64_t>& heads, bool uniform) {
  [[maybe_unused]] const int64_t B = qs.size(0), n = qs.size(1), group = qs.size(2), T = qs.size(3),
                                 d = qs.size(4);
  [[maybe_unused]] const torch::Tensor seg_k = seg.k(), seg_v = seg.v();
  // Read by the fused and SDPA paths only (HEADLAB_TORCH_CUDA, HEADLAB_HAVE_SDPA builds).
  [[maybe_unused]] const double scale = 1.0 / std::sqrt(double(d));
  torch::Tensor out;  // [B, n, g, T, d]
  // The fused paths' prefill chunks (DecoderPathLabel) run fused kernels instead of the
  // [B, n, g, T, L] scores of MaskedSegment, which the reference path keeps as the independent
  // answer and anchor-reuse keeps for its top-k. Heads in one state: a bounded segment (local
  // and streaming heads, whose slots are few) through the fused hybrid kernel in ChunkFormOf's
  // fused frame, the sink and the window in one launch; where that frame is not short
  // (at most 4 T slots: its padding rows are computed too) or not available, the flash
  // kernel with no mask where ChunkFormOf's flash form expresses the keys (ordinary heads over a
  // full segment: its lower-right causal mask; local and streaming heads: its causal window, plus
  // the sink slots in a second call); the rest through the memory-efficient kernel reading a
  // boolean mask (MaskedSegment).
  [[maybe_unused]] const ChunkForm form =
      lc.fused_chunk && uniform ? ChunkFormOf(lc.states[size_t(heads[0])], seg, lc.position, T)
                                : ChunkForm{};
#if HEADLAB_TORCH_CUDA
  if (form.fused && seg.bounded && form.w1 <= 4 * T && seg_k.scalar_type() == qs.scalar_type()) {
    std::vector<kernels::HeadSpec> specs;
    for (int64_t h : heads) specs.push_back(KernelHeadSpec(lc.states[size_t(h)]));
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
  return out;
}

// The keys each of `heads` (qs [B, n, group, T, d]) may see among the segment's cached ones:
// [1, n | 1, group | 1, T, L], or [B, n, group, T, L] where anchor-reuse picks them.
torch::Tensor AllowedKeys(const LayerChunk& lc, const KvSegment& seg, const torch::Tensor& qs,
                          const std::vector<int64_t>& heads, bool uniform) {
  const int64_t B = qs.size(0), n = qs.size(1), group = qs.size(2), T = qs.size(3);
  const int64_t L = seg.entries;
  const std::vector<HeadState>& states = lc.states;
  const torch::Tensor kpos = SlotPositions(seg, qs.device());  // [L] positions of the cached keys
  torch::Tensor allowed;                                       // [1, n | 1, group | 1, T, L]
  if (uniform) {
    allowed =
        AllowedKeysAt(states[size_t(heads[0])], lc.qpos, kpos, lc.position).view({1, 1, 1, T, L});
  } else {
    std::vector<torch::Tensor> masks;
    for (int64_t h : heads)
      masks.push_back(AllowedKeysAt(states[size_t(h)], lc.qpos, kpos, lc.position));
    allowed = torch::stack(masks).view({1, n, group, T, L});
  }
  if (lc.reuse && !seg.bounded) {
    // App. J.2: a reuse retrieval head attends to its own K/V at the positions its
    // anchor head selected. Full segments hold every position, so position = index.
    allowed = allowed.expand({B, n, group, T, L}).clone();
    for (size_t i = 0; i < heads.size(); ++i) {
      int64_t a = lc.options.anchor_map[size_t(lc.layer)][size_t(heads[i])];
      if (a < 0 || states[size_t(heads[i])].mode != HeadMode::kOrdinary ||
          !lc.selected->at(size_t(a)).defined())
        continue;
      torch::Tensor picked =
          torch::zeros({B, T, L}, torch::dtype(torch::kFloat).device(qs.device()));
      picked.scatter_add_(2, (*lc.selected)[size_t(a)], (*lc.selected_valid)[size_t(a)]);
      torch::Tensor slot = allowed.select(1, int64_t(i) / group).select(1, int64_t(i) % group);
      slot.copy_(slot & (picked > 0));
    }
  }
  return allowed;
}

// The attention [B, n, group, T, d] of `heads` (qs [B, n, group, T, d]) over the segment's keys
// under the mask `allowed` (AllowedKeys): on the fused paths the memory-efficient kernel, else
// (the reference, anchor-reuse) the scores themselves.
torch::Tensor MaskedSegment(const LayerChunk& lc, const KvSegment& seg, const torch::Tensor& qs,
                            const std::vector<int64_t>& heads, const torch::Tensor& allowed) {
  // B, n and T: read by the memory-efficient kernel only (HEADLAB_HAVE_SDPA builds).
  [[maybe_unused]] const int64_t B = qs.size(0), n = qs.size(1), T = qs.size(3);
  const int64_t group = qs.size(2), d = qs.size(4), L = seg.entries;
  const torch::Tensor seg_k = seg.k(), seg_v = seg.v();
#if HEADLAB_HAVE_SDPA
  if (lc.fused_chunk) {
    const double scale = 1.0 / std::sqrt(double(d));
    auto heads_of = [&](const torch::Tensor& t,
                        int64_t rows) {  // [b, n | 1, g | 1, rows, w] -> [b, n g, rows, w]
      return t.expand({t.size(0), n, group, rows, t.size(4)})
          .reshape({t.size(0), n * group, rows, t.size(4)});
    };
    return at::scaled_dot_product_attention(
               qs.reshape({B, n * group, T, d}), heads_of(seg_k.unsqueeze(2), L),
               heads_of(seg_v.unsqueeze(2), L), heads_of(allowed, T), 0.0,
               /*is_causal=*/false, scale)
        .reshape({B, n, group, T, d});
  }
#endif
  torch::Tensor scores =
      torch::matmul(qs, seg_k.unsqueeze(2).transpose(-2, -1)) / std::sqrt(double(d));
  scores = scores.masked_fill(allowed.logical_not(), kNegInf);  // [B, n, group, T, L]
  if (lc.anchor) {
    // App. J.2: anchor retrieval heads pick their top-k keys per query by score.
    const int64_t topk = std::min(lc.options.anchor_topk, L);
    for (size_t i = 0; i < heads.size(); ++i) {
      if (lc.states[size_t(heads[i])].mode != HeadMode::kOrdinary || seg.bounded) continue;
      auto top = scores.select(1, int64_t(i) / group).select(1, int64_t(i) % group).topk(topk, -1);
      torch::Tensor values = std::get<0>(top), index = std::get<1>(top);  // [B, T, topk]
      (*lc.selected)[size_t(heads[i])] = index;  // full segment: index = position
      (*lc.selected_valid)[size_t(heads[i])] = (values > kNegInf).to(torch::kFloat);
    }
  }
  return torch::matmul(torch::softmax(scores, -1), seg_v.unsqueeze(2));
}

// The query heads reading `seg` (GQA: KV head j serves heads j group .. (j + 1) group - 1),
// [n * group].
std::vector<int64_t> QueryHeads(const KvSegment& seg, int64_t group) {
  std::vector<int64_t> heads;
  for (int64_t j : seg.kv_heads)
    for (int64_t h = j * group; h < (j + 1) * group; ++h) heads.push_back(h);
  return heads;
}

// The attention [B, n, group, T, d] of the query heads `heads` (QueryHeads) that read `seg`,
// from q [B, H, T, d].
torch::Tensor SegmentAttention(const LayerChunk& lc, const KvSegment& seg,
                               const std::vector<int64_t>& heads, const torch::Tensor& q) {
  const int64_t B = q.size(0), T = q.size(2), d = q.size(3), group = lc.group;
  const int64_t n = int64_t(seg.kv_heads.size());
  bool uniform = true;  // every head of the segment in one state: one broadcast mask
  for (int64_t h : heads) {
    const HeadState &a = lc.states[size_t(h)], &b = lc.states[size_t(heads[0])];
    uniform = uniform && a.mode == b.mode && a.window == b.window && a.sink == b.sink &&
              a.recent == b.recent && a.chunk == b.chunk;
  }
  torch::Tensor q_index;  // the reference path uploads a gather's indices per call
  const torch::Tensor qs = SelectHeads(q, heads, &q_index).reshape({B, n, group, T, d});
  const torch::Tensor out = UnmaskedSegment(lc, seg, qs, heads, uniform);
  if (out.defined()) return out;
  return MaskedSegment(lc, seg, qs, heads, AllowedKeys(lc, seg, qs, heads, uniform));
}

// o_proj's input [B, T, H, d] for queries q [B, H, T, d] over the layer's `segments`: each
// segment's heads written into their places (heads of no segment, read only by pruned heads,
// stay zero); a single segment of every head in order is its attention's output itself, no
// copy (the flash and fused kernels write [B, T, H, d]). Undefined when there is no segment.
torch::Tensor ChunkAttention(const LayerChunk& lc, const std::vector<KvSegment>& segments,
                             const torch::Tensor& q, int64_t KV) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), d = q.size(3), group = lc.group;
  size_t covered = 0;
  for (const KvSegment& seg : segments) covered += seg.kv_heads.size();
  bool in_order = segments.size() == 1 && covered == size_t(KV);
  for (size_t i = 0; in_order && i < segments[0].kv_heads.size(); ++i)
    in_order = segments[0].kv_heads[i] == int64_t(i);
  torch::Tensor merged;
  for (const KvSegment& seg : segments) {
    const int64_t n = int64_t(seg.kv_heads.size());
    const std::vector<int64_t> heads = QueryHeads(seg, group);
    const torch::Tensor out = SegmentAttention(lc, seg, heads, q);  // [B, n, g, T, d]
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
  return merged;
}

}  // namespace

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
  const int64_t d = attn->head_dim();
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
    q = RopeAppendChunk(c, qkv, qpos, position_, rope, &layers_[size_t(layer)]);
    appended = true;
  }
#endif
  if (!appended) Project(c, attn, xc, qkv, qpos, rope, &q, &k, &v);
  if (capturing_) {  // the captured decode step (GraphStep): no host position in it
    AppendAt(layer, k, v, qpos);
    return Linear(attn->o_proj, FusedDecode(layer, q, qpos).reshape({B, T, H * d}));
  }
  if (!appended) Append(layer, k, v);
  if (fused_ && T == 1 && x.is_cuda())  // a decode step: the split-K kernel (DecoderPathLabel)
    return Linear(attn->o_proj, FusedDecode(layer, q, torch::Tensor()).reshape({B, T, H * d}));
  const bool reuse_on = options_.anchor_block > 1;
  const bool anchor = reuse_on && layer % options_.anchor_block == 0;
  if (anchor) {
    selected_.assign(size_t(H), torch::Tensor());
    selected_valid_.assign(size_t(H), torch::Tensor());
  }
  const std::vector<HeadState>& states = states_[size_t(layer)];
  const LayerChunk lc{states,
                      options_,
                      layer,
                      position_,
                      H / KV,
                      qpos,
                      /*fused_chunk=*/HEADLAB_HAVE_SDPA && fused_ && !reuse_on && q.is_cuda(),
                      anchor,
                      /*reuse=*/reuse_on && !anchor,
                      &selected_,
                      &selected_valid_};
  torch::Tensor merged = ChunkAttention(lc, layers_[size_t(layer)], q, KV);
  if (!merged.defined()) merged = torch::zeros({B, T, H, d}, xc.options());
  for (int64_t h = 0; h < H; ++h)  // pruned heads contribute nothing
    if (states[size_t(h)].mode == HeadMode::kPruned) merged.select(2, h).zero_();
  return attn->o_proj(merged.reshape({B, T, H * d}));
}

}  // namespace headlab::decode
