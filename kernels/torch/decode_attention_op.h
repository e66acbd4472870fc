// decode_attention_op.h: the decode kernel (kernels/decode_attention.h) on LibTorch tensors,
// for the KV-cache decoder (payload/decode/decoder.h). Builds against Debian's
// LibTorch 1.13 (CPU: DecodeAttentionAvailable() is false and the call throws) and LibTorch
// 2.11 with CUDA; inference only (no autograd).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "kernels/decode_attention.h"

namespace headlab {
namespace kernels {

// One cache segment as the decoder keeps it: k_buf, v_buf [B, n, capacity, d] (slots
// [0, entries) live), slot -> position map of decode_attention.h (lead, tail_start), and
// the layer's KV head of each of the n cached heads.
struct DecodeSegment {
  torch::Tensor k_buf, v_buf;
  int64_t entries = 0, lead = 0, tail_start = 0;
  int64_t ring = 0;  // > 0: decode_attention.h's ring layout (entries == lead + ring)
  std::vector<int> layer_kv_heads;
};

// Returns true iff this build can run the decode kernel: LibTorch with CUDA and the kernels.
bool DecodeAttentionAvailable();

// Writes into o [B, H, d] the attention of the query token q [B, H, d] (at position
// `query_position`, already in the cache) over `segments` (one launch for up to
// kMaxDecodeSegments of them), for the query heads of the segments' KV heads only (GQA
// group H / kv_heads; a KV head in one segment at most); specs has one entry per query head
// (no fixed heads). q, o and the cache: CUDA, one dtype (fp32/bf16/fp16), last dimension
// contiguous. Runs on the current CUDA stream without a host sync (so it can be captured
// in a CUDA graph). With `device_position` (a CUDA int64 tensor of one element) the kernels
// read the query position from it when they run and query_position is ignored
// (decode_attention.h, "Device query position"). `counts`: the kernel's arrival counters
// (DecodeArgs::counts), a CUDA int32 tensor of at least B x kv_heads zeros, which every call
// leaves zero: one tensor serves every call on a stream and every replay of a captured
// graph; undefined: a zeroed one per call (an extra fill). Throws c10::Error on bad input
// or when !DecodeAttentionAvailable().
void DecodeAttentionInto(const torch::Tensor& q, const std::vector<DecodeSegment>& segments,
                         const std::vector<HeadSpec>& specs, int64_t kv_heads,
                         int64_t query_position, double scale, torch::Tensor* o,
                         const torch::Tensor& device_position = {},
                         const torch::Tensor& counts = {});

}  // namespace kernels
}  // namespace headlab
