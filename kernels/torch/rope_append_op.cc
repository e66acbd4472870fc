// rope_append_op.cc: maps LibTorch tensors onto RopeAppend's raw pointers and takes the
// current stream.
#include "kernels/torch/rope_append_op.h"

#include <algorithm>

#include "kernels/torch/dtype.h"

#if HEADLAB_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/rope_append.h"
#endif

namespace headlab {
namespace kernels {

bool RopeAppendAvailable() {
#if HEADLAB_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

#if HEADLAB_TORCH_CUDA
namespace {

// Fills RopeAppendArgs and launches: qkv [B, T, H + 2 KV, d] with contiguous rows, tables
// [P, d] (a chunk: P = T; a step: rows of positions) or undefined, q [B, T, H, d] out;
// `position`: a decode step's device position (T = 1), null for a chunk (each target's
// first_slot).
void Launch(int64_t heads, int64_t kv_heads, const torch::Tensor& qkv, const torch::Tensor& cos,
            const torch::Tensor& sin, const torch::Tensor& q,
            const std::vector<AppendTarget>& targets, const int64_t* position) {
  const int64_t B = qkv.size(0), T = qkv.size(1), d = qkv.size(3);
  RopeAppendArgs a;
  a.heads = int(heads);
  a.kv_heads = int(kv_heads);
  a.qkv = qkv.data_ptr();
  a.qkv_stride_b = qkv.stride(0);
  a.qkv_stride_t = qkv.stride(1);
  a.position = position;
  a.batch = int(B);
  a.tokens = int(T);
  a.head_dim = int(d);
  a.dtype = KernelDType(qkv.scalar_type(), "rope_append");
  torch::Tensor c, s;
  if (cos.defined() || sin.defined()) {
    TORCH_CHECK(cos.defined() && sin.defined() && cos.dim() == 2 && cos.sizes() == sin.sizes() &&
                    cos.size(1) == d &&
                    (position != nullptr ? cos.size(0) >= 1 : cos.size(0) == T) && cos.is_cuda() &&
                    sin.is_cuda() && cos.scalar_type() == qkv.scalar_type() &&
                    sin.scalar_type() == qkv.scalar_type(),
                "rope_append: cos and sin must be CUDA tensors in qkv's dtype, [T, d] for a chunk "
                "and [positions, d] "
                "for a step");
    c = cos.contiguous();
    s = sin.contiguous();
    a.cos = c.data_ptr();
    a.sin = s.data_ptr();
    a.table_rows = int(c.size(0));
  }
  a.q = q.data_ptr();
  a.q_stride_b = q.stride(0);
  a.q_stride_t = q.stride(1);
  TORCH_CHECK(targets.size() <= size_t(kMaxDecodeSegments),
              "rope_append: more segments than kMaxDecodeSegments");
  a.segments = int(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const AppendTarget& t = targets[i];
    TORCH_CHECK(t.k_buf.is_cuda() && t.k_buf.dim() == 4 && t.k_buf.sizes() == t.v_buf.sizes() &&
                    t.k_buf.strides() == t.v_buf.strides() && t.k_buf.stride(3) == 1 &&
                    t.k_buf.scalar_type() == qkv.scalar_type() &&
                    t.v_buf.scalar_type() == qkv.scalar_type() && t.k_buf.size(0) == B &&
                    t.k_buf.size(3) == d && t.k_buf.size(1) == int64_t(t.layer_kv_heads.size()),
                "rope_append: a target's k_buf and v_buf must be CUDA [B, n, capacity, d] alike in "
                "qkv's dtype");
    AppendSegment& sg = a.seg[i];
    sg.k = t.k_buf.data_ptr();
    sg.v = t.v_buf.data_ptr();
    sg.stride_b = t.k_buf.stride(0);
    sg.stride_h = t.k_buf.stride(1);
    sg.stride_t = t.k_buf.stride(2);
    sg.capacity = int(t.k_buf.size(2));
    sg.kv_heads = int(t.layer_kv_heads.size());
    sg.layer_kv_heads = t.layer_kv_heads.data();
    sg.sink = int(t.sink);
    sg.ring = int(t.ring);
    sg.first_slot = position == nullptr ? int(t.first_slot) : -1;
  }
  c10::cuda::CUDAGuard guard(qkv.device());
  const KernelStatus st =
      RopeAppend(a, c10::cuda::getCurrentCUDAStream(qkv.device().index()).stream());
  TORCH_CHECK(st.ok(), st.message);
}

}  // namespace
#endif

torch::Tensor RopeAppendInto(const torch::Tensor& qkv, int64_t heads, int64_t kv_heads,
                             const torch::Tensor& cos, const torch::Tensor& sin,
                             const std::vector<AppendTarget>& targets,
                             const torch::Tensor& position) {
  TORCH_CHECK(RopeAppendAvailable(), "rope_append: this build has no CUDA kernels");
#if HEADLAB_TORCH_CUDA
  TORCH_CHECK(qkv.is_cuda() && qkv.dim() == 3 && qkv.size(1) == heads + 2 * kv_heads &&
                  qkv.stride(2) == 1 && qkv.stride(1) == qkv.size(2),
              "rope_append: qkv must be a CUDA [B, H + 2 KV, d] tensor with contiguous rows");
  TORCH_CHECK(position.is_cuda() && position.scalar_type() == torch::kLong && position.numel() == 1,
              "rope_append: position must be one CUDA int64");
  torch::Tensor q = torch::empty({qkv.size(0), heads, qkv.size(2)}, qkv.options());
  Launch(heads, kv_heads, qkv.unsqueeze(1), cos, sin, q.unsqueeze(1), targets,
         position.data_ptr<int64_t>());
  return q;
#else
  (void)qkv, (void)heads, (void)kv_heads, (void)cos, (void)sin, (void)targets, (void)position;
  return torch::Tensor();
#endif
}

torch::Tensor RopeAppendChunkInto(const torch::Tensor& qkv, int64_t heads, int64_t kv_heads,
                                  const torch::Tensor& cos, const torch::Tensor& sin,
                                  const std::vector<AppendTarget>& targets) {
  TORCH_CHECK(RopeAppendAvailable(), "rope_append: this build has no CUDA kernels");
#if HEADLAB_TORCH_CUDA
  TORCH_CHECK(qkv.is_cuda() && qkv.dim() == 4 && qkv.size(2) == heads + 2 * kv_heads &&
                  qkv.stride(3) == 1 && qkv.stride(2) == qkv.size(3),
              "rope_append: qkv must be a CUDA [B, T, H + 2 KV, d] tensor with contiguous rows");
  torch::Tensor q = torch::empty({qkv.size(0), qkv.size(1), heads, qkv.size(3)}, qkv.options());
  Launch(heads, kv_heads, qkv, cos, sin, q, targets, /*position=*/nullptr);
  return q;
#else
  (void)qkv, (void)heads, (void)kv_heads, (void)cos, (void)sin, (void)targets;
  return torch::Tensor();
#endif
}

}  // namespace kernels
}  // namespace headlab
