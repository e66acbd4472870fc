// What the decoder's files share (decoder.cc: construction, cache bookkeeping, chunks;
// decoder_attention.cc: a layer's attention on the reference and fused paths;
// decoder_graph.cc: the captured CUDA-graph step and its compute-dtype weights): the structs
// decoder.h declares, and helpers more than one of them calls. Included only by those files.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "kernels/decode_linear.h"  // DecodeActivation
#include "payload/decode/decoder.h"

#if HEADLAB_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#endif

namespace headlab::decode {

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

// act(x W^T + bias): a decode step's few rows on one kernel (kernels/decode_linear.h) where
// it takes them, else LibTorch's linear (cuBLAS) and activation, as BlockImpl::Mlp applies it.
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                     kernels::DecodeActivation act = kernels::DecodeActivation::kNone);
torch::Tensor Linear(const torch::nn::Linear& layer, const torch::Tensor& x,
                     kernels::DecodeActivation act = kernels::DecodeActivation::kNone);

// Makes *rope's tables [T, d] in `dtype` for positions qpos [T] (on qpos's device) unless it
// has them in that dtype. The tables come from RotaryEmbedding itself: it rotates the basis
// (1, .., 1, 0, .., 0) to (cos, sin), with the model's RoPE scaling and YaRN's factor in them.
void MakeRope(torch::ScalarType dtype, int64_t d, const RopeSpec& spec, const torch::Tensor& qpos,
              ChunkRope* rope);

// Returns x[:, heads] for x [B, h, T, d]: a view when `heads` is a contiguous run (the
// reordered layout of AoH §5), else a gather with the indices uploaded once into *index
// (an upload per call would wait for the device each time).
torch::Tensor SelectHeads(const torch::Tensor& x, const std::vector<int64_t>& heads,
                          torch::Tensor* index);

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

// The entries of a bounded segment that AoH §5 retains before `next`: a leading run
// (p < sink) and a trailing run (keys p with next - p < recent, the recent window the next
// query can reach); everything between is evicted. Positions ascend.
std::pair<int64_t, int64_t> Retained(const KvSegment& s, int64_t next);

// Replaces *buf by a zero-filled [B, n, capacity, d] buffer like `like`, keeping its first
// `entries` slots. Zero-filled: graph steps read slots they have not written yet (masked,
// but they must hold finite values: decode_attention.h).
void Regrow(torch::Tensor* buf, int64_t entries, int64_t capacity, const torch::Tensor& like);

// Makes room in *buf for T = like.size(2) slots after its first `entries`, for data shaped
// like `like` [B, n, T, d], doubling its capacity when it is full (a new buffer also when the
// batch, heads or dtype differ, as after a Reset for another batch size: then nothing is
// kept). Returns the first slot of the room.
int64_t Reserve(torch::Tensor* buf, int64_t entries, const torch::Tensor& like);

// Records on the host that positions [first, first + T) were appended to *seg.
void NoteAppended(KvSegment* seg, int64_t first, int64_t T);

}  // namespace headlab::decode
