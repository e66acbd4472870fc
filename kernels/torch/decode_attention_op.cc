// decode_attention_op.cc: maps LibTorch tensors onto DecodeAttention's raw pointers and
// strides, allocates its workspace from the caching allocator and takes the current stream.
#include "kernels/torch/decode_attention_op.h"

#include <algorithm>

#include "kernels/torch/dtype.h"

#if HEADLAB_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace headlab {
namespace kernels {

bool DecodeAttentionAvailable() {
#if HEADLAB_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

void DecodeAttentionInto(const torch::Tensor& q, const std::vector<DecodeSegment>& segments,
                         const std::vector<HeadSpec>& specs, int64_t kv_heads,
                         int64_t query_position, double scale, torch::Tensor* o,
                         const torch::Tensor& device_position, const torch::Tensor& counts) {
  TORCH_CHECK(DecodeAttentionAvailable(), "decode attention: this build has no CUDA kernels");
#if HEADLAB_TORCH_CUDA
  TORCH_CHECK(q.dim() == 3 && o->dim() == 3 && q.sizes() == o->sizes(),
              "decode attention: q and o must be [B, H, d]");
  TORCH_CHECK(q.is_cuda() && o->is_cuda(), "decode attention: CUDA tensors only");
  TORCH_CHECK(o->scalar_type() == q.scalar_type(), "decode attention: q and o dtypes differ");
  TORCH_CHECK(q.stride(2) == 1 && o->stride(2) == 1,
              "decode attention: the last dimension must be contiguous");
  TORCH_CHECK(int64_t(specs.size()) == q.size(1), "decode attention: one HeadSpec per query head");
  TORCH_CHECK(!segments.empty(), "decode attention: no segment");
  DecodeArgs a;
  a.batch = int(q.size(0));
  a.heads = int(q.size(1));
  a.kv_heads = int(kv_heads);
  a.head_dim = int(q.size(2));
  a.scale = float(scale);
  a.dtype = KernelDType(q.scalar_type(), "decode attention");
  a.head_specs = specs.data();
  a.query_position = int(query_position);
  if (device_position.defined()) {
    TORCH_CHECK(device_position.is_cuda() && device_position.scalar_type() == torch::kLong &&
                    device_position.numel() == 1,
                "decode attention: device_position must be one CUDA int64");
    a.device_query_position = device_position.data_ptr<int64_t>();
  }
  a.q = {q.data_ptr(), q.stride(0), 0, q.stride(1)};
  a.o = {o->data_ptr(), o->stride(0), 0, o->stride(1)};
  c10::cuda::CUDAGuard guard(q.device());
  const int64_t count_ints = int64_t(DecodeCountsBytes(a) / sizeof(int));
  torch::Tensor arrivals =
      counts.defined() ? counts : torch::zeros({count_ints}, q.options().dtype(torch::kInt));
  TORCH_CHECK(arrivals.is_cuda() && arrivals.device() == q.device() &&
                  arrivals.scalar_type() == torch::kInt && arrivals.is_contiguous() &&
                  arrivals.numel() >= count_ints,
              "decode attention: counts must be a contiguous CUDA int32 tensor of >= B x kv_heads "
              "zeros on q's device");
  a.counts = arrivals.data_ptr<int>();
  // Up to kMaxDecodeSegments segments per launch (one kernel each).
  for (size_t first = 0; first < segments.size(); first += kMaxDecodeSegments) {
    a.segments = int(std::min(segments.size() - first, size_t(kMaxDecodeSegments)));
    for (int s = 0; s < a.segments; ++s) {
      const DecodeSegment& segment = segments[first + size_t(s)];
      const torch::Tensor& k = segment.k_buf;
      const torch::Tensor& v = segment.v_buf;
      TORCH_CHECK(k.dim() == 4 && k.sizes() == v.sizes() && k.strides() == v.strides(),
                  "decode attention: k_buf and v_buf must be [B, n, capacity, d] alike");
      TORCH_CHECK(k.is_cuda() && v.is_cuda(), "decode attention: CUDA tensors only");
      TORCH_CHECK(k.scalar_type() == q.scalar_type(),
                  "decode attention: q, cache and o dtypes differ");
      TORCH_CHECK(k.stride(3) == 1, "decode attention: the last dimension must be contiguous");
      TORCH_CHECK(k.size(0) == q.size(0) && k.size(3) == q.size(2) &&
                      k.size(1) == int64_t(segment.layer_kv_heads.size()) &&
                      segment.entries <= k.size(2),
                  "decode attention: the cache disagrees with q on B, d or its heads");
      DecodeCache& c = a.caches[s];
      c.k = k.data_ptr();
      c.v = v.data_ptr();
      c.stride_b = k.stride(0);
      c.stride_h = k.stride(1);
      c.stride_t = k.stride(2);
      c.entries = int(segment.entries);
      c.lead = int(segment.lead);
      c.tail_start = int(segment.tail_start);
      c.ring = int(segment.ring);
      c.kv_heads = int(segment.layer_kv_heads.size());
      c.layer_kv_heads = segment.layer_kv_heads.data();
    }
    const size_t bytes = DecodeWorkspaceBytes(a);
    torch::Tensor work = torch::empty({int64_t((bytes + 3) / 4)}, q.options().dtype(torch::kFloat));
    a.workspace = work.data_ptr();
    const KernelStatus st =
        DecodeAttention(a, c10::cuda::getCurrentCUDAStream(q.device().index()).stream());
    TORCH_CHECK(st.ok(), "decode attention: ", st.message);
  }
#else
  (void)q, (void)segments, (void)specs, (void)kv_heads, (void)query_position, (void)scale, (void)o,
      (void)device_position;
  (void)counts;
#endif
}

}  // namespace kernels
}  // namespace headlab
