// hybrid_attention.cu: argument validation and dispatch of the hybrid-head layer to the
// SIMT (every dtype; fp32's path) or tensor-core (bf16/fp16) implementation.
#include "kernels/hybrid_attention.h"

#include "kernels/hybrid_attention_internal.cuh"

namespace headlab {
namespace kernels {
namespace {

using internal::FromCuda;
using internal::Params;

KernelStatus ValidateShapeAndHeads(const AttentionShape& s, const HeadSpec* heads) {
  if (s.batch < 1 || s.seq_len < 1) return Invalid("batch and seq_len must be >= 1");
  if (s.heads < 1 || s.heads > kMaxHeads) return Invalid("heads must be in [1, kMaxHeads]");
  if (s.kv_heads < 1 || s.heads % s.kv_heads != 0) return Invalid("kv_heads must divide heads");
  if (s.head_dim != 64 && s.head_dim != 96 && s.head_dim != 128)
    return {KernelCode::kUnsupported, "head_dim must be 64, 96 or 128"};
  if (!(s.scale > 0.f) || !std::isfinite(s.scale)) return Invalid("scale must be finite and > 0");
  if (s.dtype != DType::kF32 && s.dtype != DType::kBF16 && s.dtype != DType::kF16)
    return Invalid("unknown dtype");
  if ((int64_t)s.batch * s.heads * s.seq_len * s.head_dim >= (int64_t(1) << 31))
    return {KernelCode::kUnsupported, "B*H*T*d must stay below 2^31"};
  if (heads == nullptr) return Invalid("heads is null");
  for (int h = 0; h < s.heads; ++h) {
    const HeadSpec& hs = heads[h];
    switch (hs.state) {
      case HeadState::kOrdinary:
      case HeadState::kPruned:
        break;
      case HeadState::kLocal:
        if (hs.window < 1) return Invalid("local head needs window >= 1");
        break;
      case HeadState::kStreaming:
        if (hs.recent < 1 || hs.sink < 0)
          return Invalid("streaming head needs recent >= 1, sink >= 0");
        break;
      case HeadState::kFixed:
        if (!hs.alpha || !hs.rho || !hs.log_z) return Invalid("fixed head needs alpha, rho, log_z");
        break;
      default:
        return Invalid("unknown head state");
    }
  }
  return {};
}

KernelStatus ValidateView(const TensorView& v, const char* null_message) {
  if (v.data == nullptr) return Invalid(null_message);
  if (v.stride_b < 0 || v.stride_t < 0 || v.stride_h < 0) return Invalid("negative stride");
  return {};
}

// Returns true iff every row of the view starts 16-byte aligned (tensor-core loads).
bool RowsAligned(const TensorView& v, DType dtype) {
  const int64_t vec = 16 / int64_t(DTypeSize(dtype));
  return AlignedTo(v.data, 16) && v.stride_b % vec == 0 && v.stride_t % vec == 0 &&
         v.stride_h % vec == 0;
}

bool ForcesTensorCores(KernelPath path) {
  return path == KernelPath::kTensorCore || path == KernelPath::kWgmma ||
         path == KernelPath::kWgmmaWs;
}

// True iff this library was built for sm_90a (HEADLAB_KERNELS_SM90A, kernels/CMakeLists.txt)
// and the current device is compute 9.x: the wgmma kernels can run.
bool Sm90a() {
#if defined(HEADLAB_KERNELS_SM90A)
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
    return false;
  return major == 9;
#else
  return false;
#endif
}

internal::View ToView(const TensorView& v) { return {v.data, v.stride_b, v.stride_t, v.stride_h}; }

Params MakeParams(const AttentionShape& s, const HeadSpec* heads) {
  Params p{};
  p.B = s.batch;
  p.T = s.seq_len;
  p.H = s.heads;
  p.G = s.kv_heads;
  p.d = s.head_dim;
  p.scale = s.scale;
  for (int h = 0; h < s.heads; ++h) {
    p.heads[h] = {static_cast<int32_t>(heads[h].state),
                  heads[h].window,
                  heads[h].sink,
                  heads[h].recent,
                  heads[h].alpha,
                  heads[h].rho,
                  heads[h].log_z};
  }
  return p;
}

template <typename Fn>
cudaError_t ByDType(DType dtype, Fn fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{});
    case DType::kBF16:
      return fn(__nv_bfloat16{});
    default:
      return fn(__half{});
  }
}

}  // namespace

size_t BackwardWorkspaceBytes(const AttentionShape& s) {
  return sizeof(float) * size_t(s.batch) * s.heads * s.seq_len * (s.head_dim + 1);
}

KernelStatus ValidateForward(const ForwardArgs& a) {
  KernelStatus st = ValidateShapeAndHeads(a.shape, a.heads);
  if (!st.ok()) return st;
  for (auto [v, m] : {std::pair{&a.q, "q is null"},
                      {&a.k, "k is null"},
                      {&a.v, "v is null"},
                      {&a.o, "o is null"}}) {
    if (!(st = ValidateView(*v, m)).ok()) return st;
  }
  if (a.lse == nullptr) return Invalid("lse is null");
  return {};
}

KernelStatus ValidateBackward(const BackwardArgs& a) {
  KernelStatus st = ValidateShapeAndHeads(a.shape, a.heads);
  if (!st.ok()) return st;
  for (auto [v, m] : {std::pair{&a.q, "q is null"},
                      {&a.k, "k is null"},
                      {&a.v, "v is null"},
                      {&a.o, "o is null"},
                      {&a.d_o, "d_o is null"},
                      {&a.dq, "dq is null"},
                      {&a.dk, "dk is null"},
                      {&a.dv, "dv is null"}}) {
    if (!(st = ValidateView(*v, m)).ok()) return st;
  }
  if (a.lse == nullptr) return Invalid("lse is null");
  if (a.workspace == nullptr) return Invalid("workspace is null");
  return {};
}

namespace {

// The implementation a launch runs: the warp-specialised wgmma kernels, wgmma, mma.sync or
// SIMT, or a refusal when `requested` forces a path the arguments or the build cannot take.
// `tc_possible`: bf16/fp16 with 16-byte aligned rows.
enum class Chosen { kSimt, kMma, kWgmma, kWgmmaWs, kRefused };
Chosen ChoosePath(const AttentionShape& shape, bool tc_possible, KernelPath requested,
                  KernelStatus* refusal) {
  if (ForcesTensorCores(requested) && !tc_possible) {
    *refusal = {KernelCode::kUnsupported,
                "tensor-core path needs bf16/fp16 and 16-byte aligned rows"};
    return Chosen::kRefused;
  }
  const bool tc = tc_possible && requested != KernelPath::kSimt;
  const bool hopper = tc && requested != KernelPath::kTensorCore && Sm90a();
  const bool ws =
      hopper && requested != KernelPath::kWgmma && (shape.head_dim == 64 || shape.head_dim == 128);
  const bool wgmma = hopper && requested != KernelPath::kWgmmaWs && shape.head_dim == 64;
  if (requested == KernelPath::kWgmmaWs && !ws) {
    *refusal = {
        KernelCode::kUnsupported,
        "the warp-specialised kernels need an sm_90a build, an sm_90 device and d = 64 or 128"};
    return Chosen::kRefused;
  }
  if (requested == KernelPath::kWgmma && !wgmma) {
    *refusal = {KernelCode::kUnsupported,
                "wgmma kernels need an sm_90a build, an sm_90 device and d = 64"};
    return Chosen::kRefused;
  }
  return ws ? Chosen::kWgmmaWs : wgmma ? Chosen::kWgmma : tc ? Chosen::kMma : Chosen::kSimt;
}

const char* ChosenName(Chosen c) {
  switch (c) {
    case Chosen::kWgmmaWs:
      return "wgmma-ws";
    case Chosen::kWgmma:
      return "wgmma";
    case Chosen::kMma:
      return "mma.sync";
    case Chosen::kSimt:
      return "simt";
    default:
      return "refused";
  }
}

bool ForwardTensorCorePossible(const ForwardArgs& a) {
  return a.shape.dtype != DType::kF32 && RowsAligned(a.q, a.shape.dtype) &&
         RowsAligned(a.k, a.shape.dtype) && RowsAligned(a.v, a.shape.dtype) &&
         RowsAligned(a.o, a.shape.dtype);
}

bool BackwardTensorCorePossible(const BackwardArgs& a) {
  bool possible = a.shape.dtype != DType::kF32;
  for (const TensorView* v : {&a.q, &a.k, &a.v, &a.d_o, &a.dk, &a.dv})
    possible = possible && RowsAligned(*v, a.shape.dtype);
  return possible;
}

}  // namespace

int ExecutedHeadDim(const AttentionShape& s) {
  constexpr int kPadded = 128;
  if (s.head_dim != 96 || s.dtype == DType::kF32 || !Sm90a()) return s.head_dim;
  if (int64_t(s.batch) * s.heads * s.seq_len * kPadded >= (int64_t(1) << 31)) return s.head_dim;
  return kPadded;
}

const char* ForwardPathName(const ForwardArgs& a) {
  KernelStatus refusal;
  return ChosenName(ChoosePath(a.shape, ForwardTensorCorePossible(a), a.path, &refusal));
}

const char* BackwardPathName(const BackwardArgs& a) {
  KernelStatus refusal;
  return ChosenName(ChoosePath(a.shape, BackwardTensorCorePossible(a), a.path, &refusal));
}

KernelStatus HybridAttentionForward(const ForwardArgs& a, void* stream) {
  KernelStatus st = ValidateForward(a);
  if (!st.ok()) return st;
  const Chosen chosen = ChoosePath(a.shape, ForwardTensorCorePossible(a), a.path, &st);
  if (chosen == Chosen::kRefused) return st;
  Params p = MakeParams(a.shape, a.heads);
  p.q = ToView(a.q);
  p.k = ToView(a.k);
  p.v = ToView(a.v);
  p.o = ToView(a.o);
  p.lse = a.lse;
  auto s = static_cast<cudaStream_t>(stream);
  return FromCuda(ByDType(a.shape.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      return internal::LaunchSimtForward<T>(p, s);
    } else {
      if (chosen == Chosen::kWgmmaWs) return internal::LaunchWsForward<T>(p, s);
      if (chosen == Chosen::kWgmma) return internal::LaunchWgmmaForward<T>(p, s);
      return chosen == Chosen::kMma ? internal::LaunchMmaForward<T>(p, s)
                                    : internal::LaunchSimtForward<T>(p, s);
    }
  }));
}

KernelStatus HybridAttentionBackward(const BackwardArgs& a, void* stream) {
  KernelStatus st = ValidateBackward(a);
  if (!st.ok()) return st;
  Params p = MakeParams(a.shape, a.heads);
  p.q = ToView(a.q);
  p.k = ToView(a.k);
  p.v = ToView(a.v);
  p.o = ToView(a.o);
  p.d_o = ToView(a.d_o);
  p.dq = ToView(a.dq);
  p.dk = ToView(a.dk);
  p.dv = ToView(a.dv);
  p.lse = const_cast<float*>(a.lse);
  p.dq_acc = static_cast<float*>(a.workspace);
  p.delta = p.dq_acc + size_t(p.B) * p.H * p.T * p.d;
  const Chosen chosen = ChoosePath(a.shape, BackwardTensorCorePossible(a), a.path, &st);
  if (chosen == Chosen::kRefused) return st;
  auto s = static_cast<cudaStream_t>(stream);
  return FromCuda(ByDType(a.shape.dtype, [&](auto t) {
    using T = decltype(t);
    cudaError_t e = internal::LaunchBackwardPreprocess<T>(p, s);
    if (e != cudaSuccess) return e;
    if constexpr (std::is_same_v<T, float>) {
      e = internal::LaunchSimtBackward<T>(p, s);
    } else if (chosen == Chosen::kWgmmaWs) {
      e = internal::LaunchWsBackward<T>(p, s);
    } else if (chosen == Chosen::kWgmma) {
      e = internal::LaunchWgmmaBackward<T>(p, s);
    } else {
      e = chosen == Chosen::kMma ? internal::LaunchMmaBackward<T>(p, s)
                                 : internal::LaunchSimtBackward<T>(p, s);
    }
    if (e != cudaSuccess) return e;
    return internal::LaunchBackwardFinish<T>(p, s);
  }));
}

}  // namespace kernels
}  // namespace headlab
