// c_api.cu: a C ABI over the hybrid-head kernels for dev tools in other languages
// (scripts/gpu/bench_vs_sdpa.py loads it with ctypes to time the kernels and LibTorch SDPA in
// one process). Not the training integration: that is kernels/torch/.
//
// Arguments: states is H x 4 int32 (state, window, sink, recent); fixed is H x 3 device
// pointers (alpha, rho, log_z; 0 for other heads); views are (data, stride_b, stride_t,
// stride_h) with strides in elements. Returns 0 on success, else the KernelCode, and copies
// the message into err (err_len bytes).
#include <cstdint>
#include <cstring>

#include "kernels/hybrid_attention.h"

using namespace headlab::kernels;

namespace {

AttentionShape Shape(const int32_t* dims, float scale) {
  AttentionShape s;
  s.batch = dims[0];
  s.seq_len = dims[1];
  s.heads = dims[2];
  s.kv_heads = dims[3];
  s.head_dim = dims[4];
  s.dtype = static_cast<DType>(dims[5]);
  s.scale = scale;
  return s;
}

bool Heads(const int32_t* states, const uint64_t* fixed, int H, HeadSpec* out) {
  if (H < 1 || H > kMaxHeads) return false;
  for (int h = 0; h < H; ++h) {
    out[h].state = static_cast<HeadState>(states[4 * h]);
    out[h].window = states[4 * h + 1];
    out[h].sink = states[4 * h + 2];
    out[h].recent = states[4 * h + 3];
    out[h].alpha = reinterpret_cast<const float*>(fixed[3 * h]);
    out[h].rho = reinterpret_cast<const float*>(fixed[3 * h + 1]);
    out[h].log_z = reinterpret_cast<const float*>(fixed[3 * h + 2]);
  }
  return true;
}

TensorView View(const uint64_t* v) {
  return {reinterpret_cast<void*>(v[0]), int64_t(v[1]), int64_t(v[2]), int64_t(v[3])};
}

int Finish(KernelStatus st, char* err, int err_len) {
  if (err && err_len > 0) {
    std::strncpy(err, st.message, err_len - 1);
    err[err_len - 1] = 0;
  }
  return static_cast<int>(st.code);
}

}  // namespace

extern "C" {

// dims: B, T, H, Hkv, d, dtype. views: q, k, v, o (4 x 4 uint64).
int headlab_attention_forward(const int32_t* dims, float scale, const int32_t* states,
                              const uint64_t* fixed, const uint64_t* views, uint64_t lse,
                              int32_t path, uint64_t stream, char* err, int err_len) {
  HeadSpec heads[kMaxHeads];
  if (!Heads(states, fixed, dims[2], heads))
    return Finish({KernelCode::kInvalidArgument, "bad head count"}, err, err_len);
  ForwardArgs a;
  a.shape = Shape(dims, scale);
  a.heads = heads;
  a.q = View(views);
  a.k = View(views + 4);
  a.v = View(views + 8);
  a.o = View(views + 12);
  a.lse = reinterpret_cast<float*>(lse);
  a.path = static_cast<KernelPath>(path);
  return Finish(HybridAttentionForward(a, reinterpret_cast<void*>(stream)), err, err_len);
}

// views: q, k, v, o, d_o, dq, dk, dv (8 x 4 uint64).
int headlab_attention_backward(const int32_t* dims, float scale, const int32_t* states,
                               const uint64_t* fixed, const uint64_t* views, uint64_t lse,
                               uint64_t workspace, int32_t path, uint64_t stream, char* err,
                               int err_len) {
  HeadSpec heads[kMaxHeads];
  if (!Heads(states, fixed, dims[2], heads))
    return Finish({KernelCode::kInvalidArgument, "bad head count"}, err, err_len);
  BackwardArgs a;
  a.shape = Shape(dims, scale);
  a.heads = heads;
  a.q = View(views);
  a.k = View(views + 4);
  a.v = View(views + 8);
  a.o = View(views + 12);
  a.d_o = View(views + 16);
  a.dq = View(views + 20);
  a.dk = View(views + 24);
  a.dv = View(views + 28);
  a.lse = reinterpret_cast<const float*>(lse);
  a.workspace = reinterpret_cast<void*>(workspace);
  a.path = static_cast<KernelPath>(path);
  return Finish(HybridAttentionBackward(a, reinterpret_cast<void*>(stream)), err, err_len);
}

uint64_t headlab_attention_workspace_bytes(const int32_t* dims) {
  return BackwardWorkspaceBytes(Shape(dims, 1.f));
}

}  // extern "C"
