// rope_append_op.h: the RoPE + K/V append kernel (kernels/rope_append.h) on LibTorch tensors,
// for the streaming decoder's captured step and prefill chunks
// (payload/decode/decoder.h). Builds against Debian's LibTorch 1.13 (CPU:
// RopeAppendAvailable() is false and the calls throw) and LibTorch 2.11 with CUDA; inference
// only.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace headlab {
namespace kernels {

// One cache segment to append to: k_buf, v_buf [B, n, capacity, d] and the layer KV head of
// each of its n heads; a ring (ring > 0) of sink + ring slots, else slot = position; for a
// chunk (RopeAppendChunkInto), the slot of its first token (the linear layout).
struct AppendTarget {
  torch::Tensor k_buf, v_buf;
  std::vector<int> layer_kv_heads;
  int64_t sink = 0, ring = 0;
  int64_t first_slot = -1;
};

// Returns true iff this build can run the kernel: LibTorch with CUDA and the kernels.
bool RopeAppendAvailable();

// From qkv [B, H + 2 KV, d] (queries, keys, values of one token per sequence; rows of d
// contiguous): writes each target's keys (rotated) and values at the slot of the position p
// in `position` (one CUDA int64) and returns the rotated queries [B, H, d]. cos, sin:
// [P, d] in qkv's dtype, row p RoPE's cos' and sin' of position p (rope_append.h), or both
// undefined (no rotation); a p >= P writes nothing. No host sync (it can be captured in a
// CUDA graph). Throws c10::Error on bad input.
torch::Tensor RopeAppendInto(const torch::Tensor& qkv, int64_t heads, int64_t kv_heads,
                             const torch::Tensor& cos, const torch::Tensor& sin,
                             const std::vector<AppendTarget>& targets,
                             const torch::Tensor& position);

// A prefill chunk's form: from qkv [B, T, H + 2 KV, d] (rows of d contiguous), writes token
// t's keys (rotated by row t of cos, sin [T, d]) and values to slot first_slot + t of each
// target (every target linear, ring 0, with capacity for them) and returns the rotated
// queries [B, T, H, d]. The same rounding as RopeAppendInto. Throws c10::Error on bad input.
torch::Tensor RopeAppendChunkInto(const torch::Tensor& qkv, int64_t heads, int64_t kv_heads,
                                  const torch::Tensor& cos, const torch::Tensor& sin,
                                  const std::vector<AppendTarget>& targets);

}  // namespace kernels
}  // namespace headlab
