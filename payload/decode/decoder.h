// Inference with a KV cache for a hybrid-head model (AoH §5, App. J.3): chunked prefill that
// evicts streaming heads' keys after every chunk, incremental decode, optional anchor-reuse
// (App. J.2), KV-cache bytes. Included only by LibTorch translation units.
//
// The decoder runs the model's own modules (GptImpl: wte, wpe, blocks[i].{ln1, attn.{q,k,v,o}
// _proj, ln2, fc, proj}, ln_f) and reads each head's state from the hybrid layer when it is
// created, so it computes exactly GptImpl::forward with those states (tested), one chunk at
// a time instead of the whole sequence.
//
// Cache layout: per layer, KV heads are grouped into segments that share a retention policy
// (the contiguous slices of AoH §5; after ReorderLayer they are literal slices):
//   full      every position (retrieval heads: ordinary)
//   bounded   positions p < sink or p > next - recent, evicted after every chunk; sink +
//             recent - 1 entries persist between chunks, at most sink + recent while a
//             one-token decode step runs (streaming(sink, recent); local(W) = bounded(0, W));
//             a per-chunk-evicting streaming head (HeadState::chunk, AoH §5) is
//             bounded(sink, recent + 1): the `recent` newest keys persist, its prefill
//             chunks take the masked reference and a decode step is a chunk of one token
// A KV head is bounded only when every non-pruned query head reading it (GQA) has the same
// bounded policy; otherwise it is kept in full and each query head applies its own mask.
// KV heads read only by pruned heads are not cached. Fixed (SAF) heads are not supported.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "common/status.h"
#include "payload/decode/decode_path.h"
#include "payload/exec/model.h"

namespace headlab::decode {

// The attention paths of the decoder, as run provenance names them (attention_paths).
inline constexpr const char* kDecoderReferenceLabel = "kv_cache_reference";
inline constexpr const char* kDecoderFusedLabel =
    "kv_cache_fused_decode (split-K decode kernel; prefill chunks: bounded heads on the fused "
    "hybrid "
    "kernel, ordinary heads on sdpa flash, mixed groups sdpa memory-efficient)";
inline constexpr const char* kDecoderGraphLabel =
    "kv_cache_fused_decode_graph (split-K decode kernel, each step replayed as one CUDA graph; "
    "prefill chunks: bounded heads on the fused hybrid kernel, ordinary heads on sdpa flash, mixed "
    "groups sdpa memory-efficient)";

struct DecoderOptions {
  // Prefill chunk size K (AoH §5): peak working memory O(K), persistent streaming storage
  // O(sink + recent).
  int64_t prefill_chunk = 512;
  // Anchor-reuse (App. J.2): > 1 enables blocks of this many layers; anchor_map[layer][head]
  // (AnchorHeadMap) names the anchor head whose top-k key indices a reuse retrieval head
  // attends to (its own K/V at those positions); -1 = its own mask.
  int64_t anchor_block = 0;
  int64_t anchor_topk = 64;
  std::vector<std::vector<int64_t>> anchor_map;
  // The path wanted for decode steps (aoh_options.h); DecoderPathLabel says which one they
  // take. On kGraph, bounded segments are rings while steps run (KvSegment::ring).
  DecodePath path = DecodePath::kGraph;
};

// Returns the label of the path the decode steps of a decoder for `model` on `device` take
// with `options`: the reference unless this build has the decode kernel, the device is
// CUDA, options.path is not kReference, no anchor-reuse, head_dim 64 or 128 and at most 16
// query heads per KV head; then kDecoderGraphLabel for kGraph, else kDecoderFusedLabel.
const char* DecoderPathLabel(const GptImpl& model, const torch::Device& device,
                             const DecoderOptions& options);

// One group of a layer's KV heads with one retention policy (see the file comment).
// Keys and values live in a buffer of `capacity` >= entries positions that grows by
// doubling, so a decode step appends in place instead of copying the cache.
struct KvSegment {
  std::vector<int64_t> kv_heads;  // KV head indices in the layer
  bool bounded = false;
  int64_t sink = 0, recent = 0;  // bounded only
  // [B, len(kv_heads), capacity, d]; undefined before the first append, kept by Reset.
  // Slots not written by this sequence hold finite values (zeros, or an earlier sequence's).
  torch::Tensor k_buf, v_buf;
  // Cached positions: k_buf[:, :, :entries]. On the fused path a bounded segment may also
  // hold up to 64 evicted entries awaiting compaction (KvDecoder::Evict): they lead the
  // recent run, no head sees them, and KvBytes / KvEntries do not count them.
  int64_t entries = 0;
  // Bounded: the cached positions, ascending (host-side, so eviction needs no device
  // sync). Full segments hold every position 0..entries-1.
  std::vector<int64_t> positions;
  // Bounded, while graph decode steps run (DecodePath::kGraph): the ring layout of
  // decode_attention.h with lead = sink and ring = recent, so position p sits in slot
  // p < sink ? p : sink + (p - sink) mod recent and a step's slot follows from its position
  // on the device. `positions` and `entries` still count the retained positions; the
  // buffer holds sink + recent slots. 0: the linear layout (slot i holds positions[i]).
  int64_t ring = 0;
  torch::Tensor kv_index;  // kv_heads on the device, made once when they are not a run
  // The slot -> position map (kernels/decode_attention.h): slot s < lead holds position s,
  // slot s >= lead position tail_start + s - lead. Bounded positions are always of this
  // form (the sink run, then one contiguous recent run); full segments have lead = entries.
  int64_t lead() const;
  int64_t tail_start() const;
  torch::Tensor k() const { return k_buf.narrow(2, 0, entries); }
  torch::Tensor v() const { return v_buf.narrow(2, 0, entries); }
};

// How a prefill chunk's attention over one segment runs without a mask, for heads all in one
// state (AoH §5: ordinary, local(W), streaming(sink a, recent r)). Slots [w0, w1) hold one
// contiguous run of positions ending at the chunk's last query (every slot when the segment
// is one run from position 0, else the recent run after the lead); slots [0, sink) hold
// positions 0..sink-1.
//
// flash: on PyTorch's flash kernel, in two calls merged by their log-sum-exps:
//   window  over slots [w0, w1), a query seeing the last `recent` of them up to its own
//           position (the kernel's lower-right causal mask with window_size_left = recent -
//           1; recent 0: every one up to its own, plain lower-right causal);
//   sink    over slots [0, sink), which every query of the chunk sees and none sees through
//           its window (an unmasked call).
// false where the layout or the chunk's place does not allow it (a streaming head's first
// sink + recent - 1 positions, whose windows reach the sink; a run that lacks keys a window
// needs; pruned heads).
//
// fused: on the fused hybrid kernels (kernels/hybrid_attention.h), which take the heads' own
// states but only a sequence whose queries and keys share positions: slots [0, w1) read as
// a sequence at virtual positions 0..w1-1 (slot s at s), the chunk's T queries as its last T
// positions (rows before them are padding, computed and dropped). Where the slots hold
// positions 0..w1-1 themselves (nothing evicted yet) that is the model's own attention.
// Otherwise (the sink slots, then the recent run) the virtual positions of the run are its
// real ones shifted by a constant, which a window (local, streaming: distances only) does
// not see; the sink slots keep their positions, seen by every query as the sink; and slots
// between the sink and the run (evicted entries awaiting compaction) lie at least `recent`
// (or W) before every query, outside its window, when the run holds the oldest key the
// chunk's first query needs. Holds wherever flash does, and also where a streaming head's
// windows reach the sink (the kernels apply the sink themselves).
struct ChunkForm {
  bool flash = false, fused = false;
  int64_t w0 = 0, w1 = 0, recent = 0, sink = 0;
};

// The forms of a chunk of T queries at positions [P, P + T) over `segment` (its keys and
// values appended: entries end at position P + T - 1) for heads in `state`.
ChunkForm ChunkFormOf(const HeadState& state, const KvSegment& segment, int64_t P, int64_t T);

// The captured decode step's weights in the compute dtype (precision.h: bf16 or fp16).
// Autocast casts each fp32 parameter of a linear layer on every step (two cast kernels per
// layer, and ~0.75 GB of traffic per step for 124M parameters: the capture runs with the
// cast cache off); a tensor already in the compute dtype it passes through as it is. So each
// linear layer's weight and bias gets a copy in the compute dtype, made once per capture and
// swapped into its parameter (set_data, ComputeWeightsIn) while the step is captured: the
// replayed step reads the copies. They hold what the casts would give, so the step computes
// the same numbers. The output head gets its own copy, for Logits' head_weight: tied to the
// token embedding, it cannot be swapped without changing the embedding's dtype. A layer's
// q, k and v projections also get one concatenated copy, so that the step projects them with
// one GEMM and rotates q and k together (Qkv).
struct ComputeWeights {
  std::vector<torch::Tensor> params;  // the swapped parameters (weights and biases)
  std::vector<torch::Tensor> copies;  // their copies, in the same order
  torch::Tensor head;                 // the output head's copy; undefined when none is made
  // Per layer: [q; k; v] rows of the three projections' weights [(H + 2 KV) d, C] and
  // biases, in the compute dtype; undefined for a layer with q/k norms or removed heads.
  std::vector<torch::Tensor> qkv_weight, qkv_bias;
  int64_t head_dim = 0;
  // Each source's data pointer and version counter when the copies were made: params, then
  // the output head.
  std::vector<std::pair<const void*, int64_t>> seen;

  // The copies for `model` in ComputeDtype(model.precision()); none at fp32 (no autocast:
  // the model computes in its parameters' dtype).
  static ComputeWeights Make(GptImpl& model);
  // Whether every source still holds the data it had at Make: false once a parameter was
  // updated in place (an optimiser step) or replaced (RemoveHeads' set_data).
  bool Current(const GptImpl& model) const;
  // Layer `layer`'s queries, keys and values of x [B, T, C] (in the compute dtype) from one
  // GEMM: [B, H + 2 KV, T, d], heads in that order — HybridAttention's Queries, Keys and
  // Values side by side; undefined when the layer has no concatenated copy.
  torch::Tensor Qkv(int64_t layer, const torch::Tensor& x) const;
};

// Swaps the copies of `w` into their parameters for its lifetime, and the parameters' own
// data back at its end (however it ends).
class ComputeWeightsIn {
 public:
  explicit ComputeWeightsIn(const ComputeWeights& w);
  ~ComputeWeightsIn();
  ComputeWeightsIn(const ComputeWeightsIn&) = delete;
  ComputeWeightsIn& operator=(const ComputeWeightsIn&) = delete;

 private:
  const ComputeWeights& w_;
  std::vector<torch::Tensor> originals_;
};

struct ChunkRope;  // RoPE's tables for one chunk (decoder_internal.h)
struct StepGraph;  // a captured decode step (decoder_internal.h)

class KvDecoder {
 public:
  // Builds a decoder for `model` (which must outlive it) from the model's current head
  // states. InvalidArgument for fixed heads or a bad option.
  static StatusOr<std::unique_ptr<KvDecoder>> Create(GptImpl* model, const DecoderOptions& options);

  // Runs tokens [B, T] at the next T positions in chunks of prefill_chunk and returns their
  // logits [B, T, vocab]. With learned positions, position + T must stay within the
  // model's context (TORCH_CHECK).
  torch::Tensor Prefill(const torch::Tensor& tokens);
  // The same, handing each chunk's logits [B, T_chunk, vocab] (first position `start`) to
  // `on_chunk` instead of keeping them all; with `last_only`, only the last position's
  // logits are computed and handed over ([B, 1, vocab], one call at the end).
  using ChunkFn = std::function<void(int64_t start, const torch::Tensor& logits)>;
  void Prefill(const torch::Tensor& tokens, const ChunkFn& on_chunk, bool last_only = false);
  // Runs one token per sequence ([B]) at the next position; returns logits [B, vocab].
  torch::Tensor Step(const torch::Tensor& token);

  // The next position (tokens seen so far).
  int64_t position() const { return position_; }
  // Bytes of all cached keys and values (live entries: those AoH §5 retains).
  int64_t KvBytes() const;
  // Bytes allocated for them (capacity; at most twice the peak entries plus a chunk).
  int64_t KvCapacityBytes() const;
  // Cached positions of KV head `kv_head` of `layer` (0 when not cached).
  int64_t KvEntries(int64_t layer, int64_t kv_head) const;
  // The segments of `layer`.
  const std::vector<KvSegment>& segments(int64_t layer) const { return layers_[size_t(layer)]; }
  // Empties the cache and returns to position 0. The cache buffers (and a captured decode
  // step) are kept for the next sequence of the same batch size.
  void Reset();
  // Decode steps replayed from a CUDA graph so far, and graphs captured (a capture happens
  // on the first graph step and again when a buffer has to grow or the batch size changes).
  int64_t graph_replays() const { return graph_replays_; }
  int64_t graph_captures() const { return graph_captures_; }

  ~KvDecoder();

 private:
  KvDecoder(GptImpl* model, const DecoderOptions& options);
  // Runs one chunk [B, T] at positions [position_, position_ + T) and returns its logits
  // (only the last position's with `last_only`).
  torch::Tensor Chunk(const torch::Tensor& tokens, bool last_only);
  // The blocks for tokens [B, T] at positions qpos [T] (a device tensor): the hidden states
  // [B, T, C] before ln_f. Shared by Chunk and the captured decode step.
  torch::Tensor Blocks(const torch::Tensor& tokens, const torch::Tensor& qpos);
  // The layer's attention for x [B, T, C] at positions qpos [T]: appends the chunk's keys
  // and values, then runs the decode kernel (a decode step on the fused path) or the
  // reference. *rope holds the chunk's RoPE tables, made by the first layer. While a graph
  // step is captured (capturing_), the keys go to the slot qpos names on the device and the
  // kernel reads the position from qpos.
  torch::Tensor Attention(int64_t layer, const torch::Tensor& x, const torch::Tensor& qpos,
                          ChunkRope* rope);
  // Appends one chunk's keys and values [B, KV, T, d] to the layer's segments.
  void Append(int64_t layer, const torch::Tensor& k, const torch::Tensor& v);
  // The captured step's append: keys and values [B, KV, 1, d] written to the slot of the
  // position in qpos [1] (full segments: the position; rings: its ring slot).
  void AppendAt(int64_t layer, const torch::Tensor& k, const torch::Tensor& v,
                const torch::Tensor& qpos);
  // One decode step's attention through the decode kernel: q [B, H, 1, d] at position_
  // (or at the device position `qpos` while capturing), its keys and values already
  // appended; returns [B, H, d].
  torch::Tensor FusedDecode(int64_t layer, const torch::Tensor& q, const torch::Tensor& qpos);
  // The decode kernel's arrival counters for batch `batch` on `device` (decode_counts_,
  // allocated zero when missing or too small; never while a step is captured).
  const torch::Tensor& DecodeCounts(int64_t batch, const torch::Device& device);
  void Evict(int64_t next_position);
  // TORCH_CHECKs that T more positions fit a model with learned positions (model.context).
  void CheckFits(int64_t T) const;
  // A decode step through the captured graph: token [B] on CUDA. Returns the logits, or an
  // undefined tensor when this step has to run as a chunk (an empty cache).
  torch::Tensor GraphStep(const torch::Tensor& token);
  // Makes every cache ready for graph steps of batch B at position_: full segments with a
  // free slot for the step, bounded ones in the ring layout; false when a cache is empty.
  bool PrepareGraphCaches(int64_t batch);
  // With RoPE, makes step_cos_ and step_sin_ cover position_ in `dtype` on `device`: at
  // least the context's positions, twice position_'s past it. Rows come from RotaryEmbedding
  // as a chunk's tables do (MakeRope), so row p equals a chunk's table at position p.
  void PrepareStepRope(torch::ScalarType dtype, const torch::Device& device);
  // Returns bounded segments to the linear layout (before a prefill chunk or a step off
  // the graph).
  void LeaveRings();
  // weights_, made or remade when missing or no longer Current.
  const std::shared_ptr<const ComputeWeights>& Weights();

  GptImpl* model_;
  DecoderOptions options_;
  std::vector<std::vector<HeadState>> states_;  // [layer][head], copied at creation
  bool fused_ = false;                          // decode steps take the decode kernel
  bool graph_ = false;                          // ... replayed from a CUDA graph
  // While Blocks runs the graph step's body for capture.
  bool capturing_ = false;
  // While Blocks runs a captured step's body or a fused-path chunk: the compute-dtype
  // weights swapped in, whose Qkv the layers project with (else null: autocast's casts).
  const ComputeWeights* weights_in_ = nullptr;
  // The compute-dtype weights of chunks and captured steps, made on first use and remade
  // when the model's parameters change (Weights); a captured step holds the ones it reads.
  std::shared_ptr<const ComputeWeights> weights_;
  std::unique_ptr<StepGraph> step_graph_;
  // While a step is captured: each ring shape's slot for the step's position,
  // {sink, ring} -> [1] long (AppendAt), made once per step.
  std::map<std::pair<int64_t, int64_t>, torch::Tensor> ring_slots_;
  int64_t graph_replays_ = 0, graph_captures_ = 0;
  // RoPE's cos' and sin' of positions [0, rows) in the compute dtype, read by captured steps
  // at their device position (PrepareStepRope); undefined without RoPE.
  torch::Tensor step_cos_, step_sin_;
  // The decode kernel's arrival counters, int32 [B x kv_heads]: zero between launches (each
  // launch leaves them so), shared by every layer, step and captured graph.
  torch::Tensor decode_counts_;
  std::vector<std::vector<KvSegment>> layers_;  // [layer][segment]
  std::vector<torch::Tensor> selected_;         // anchor heads' top-k positions [B, T, k]
  std::vector<torch::Tensor> selected_valid_;   // ... and which of them are real keys
  int64_t position_ = 0;
};

}  // namespace headlab::decode
