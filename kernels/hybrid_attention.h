// hybrid_attention.h: the C++ API of the fused hybrid-head attention kernels.
//
// One launch per layer runs every head of the layer, each according to its HeadState:
//   kOrdinary  causal softmax attention, FlashAttention-2 online softmax.
//   kFixed     SAF eq. 3: P(i,j) = exp(alpha[j] + rho[i-j] - logZ[i]) for j <= i, else 0.
//              No Q/K reads, no scores, no softmax; O = P V. Backward: dV = P^T dO only;
//              dQ is written as exact zeros and the head adds nothing to dK.
//   kStreaming sink + recent: key k allowed iff k <= q and (k < sink or k > q - recent).
//   kLocal     causal window of W keys: key k allowed iff q - W < k <= q.
//   kPruned    O = 0, lse = -inf; no reads; zero contribution to every gradient.
// Streaming and local heads iterate only over key (forward) / query (backward) blocks
// that intersect their window: skipped blocks are never loaded, not masked.
//
// Layouts: Q, O, dO, dQ are (B, T, H, d); K, V, dK, dV are (B, T, Hkv, d), each with
// element strides for b, t, h and a contiguous last dimension (so slices of a packed QKV
// tensor work without a copy). GQA: query head h reads KV head h / (H / Hkv).
// lse is fp32 (B, H, T), contiguous: log of the softmax normaliser of each row (already
// including the scale), the statistic the backward pass needs. For fixed heads it holds
// logZ[i]; for pruned heads -inf.
// dtype: fp32, bf16 or fp16 for Q/K/V/O/dO/dQ/dK/dV; accumulation always in fp32.
// All pointers are device pointers except `heads` (a host array of H specs, copied into
// the launch parameters) — the alpha/rho/log_z pointers inside it are device pointers.
//
// No LibTorch here: the torch::autograd::Function wrapper lives in kernels/torch/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace headlab {
namespace kernels {

enum class HeadState : int32_t {
  kOrdinary = 0,
  kFixed = 1,
  kStreaming = 2,
  kLocal = 3,
  kPruned = 4
};

// Per query head. Unused fields are ignored for states that do not need them.
struct HeadSpec {
  HeadState state = HeadState::kOrdinary;
  int32_t window = 0;  // kLocal: W >= 1.
  int32_t sink = 0;    // kStreaming: number of leading keys always visible (>= 0).
  int32_t recent = 0;  // kStreaming: keys (q - recent, q] visible (>= 1).
  // kFixed: device fp32 arrays of length >= T (a longer stored prior is fine: SAF App. D.2
  // uses prior length 192 at T = 129): alpha[j] per key, rho[delta] per offset i - j,
  // log_z[i] = log sum_{k<=i} exp(alpha[k] + rho[i-k]) per row (SAF eq. 3's Z(i)).
  const float* alpha = nullptr;
  const float* rho = nullptr;
  const float* log_z = nullptr;
};

// The most query heads one launch takes (the specs travel in the kernel parameters).
constexpr int kMaxHeads = 128;

enum class DType : int32_t { kF32 = 0, kBF16 = 1, kF16 = 2 };

// Returns the size in bytes of one element of `dtype`.
inline size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

// Returns whether device address `p` is a multiple of `bytes` (null is).
inline bool AlignedTo(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// A (B, T, heads, d) device tensor view; the last dimension has stride 1.
struct TensorView {
  void* data = nullptr;
  int64_t stride_b = 0;
  int64_t stride_t = 0;
  int64_t stride_h = 0;
};

struct AttentionShape {
  int batch = 0;      // B
  int seq_len = 0;    // T
  int heads = 0;      // H, query heads (<= kMaxHeads)
  int kv_heads = 0;   // Hkv, divides H
  int head_dim = 0;   // d in {64, 96, 128} (any multiple of 16 up to 128 on the SIMT path)
  float scale = 0.f;  // softmax scale, usually 1/sqrt(d)
  DType dtype = DType::kF32;
};

enum class KernelCode : int32_t { kOk = 0, kInvalidArgument = 1, kUnsupported = 2, kCudaError = 3 };

// The Status-like result of a launch: a code and a static message (never freed).
struct KernelStatus {
  KernelCode code = KernelCode::kOk;
  const char* message = "";
  bool ok() const { return code == KernelCode::kOk; }
};

// The refusal of an argument, with its static message (each kernel's Validate*).
inline KernelStatus Invalid(const char* m) { return {KernelCode::kInvalidArgument, m}; }

// Which implementation runs: kAuto picks tensor cores for bf16/fp16 and SIMT for fp32. On
// an sm_90 device the forward at d = 64 or 128 is the warp-specialised wgmma kernel (TMA
// producer, two ping-ponging consumer warpgroups), and so is the backward, each with every
// head state in one launch; elsewhere mma.sync.
// kSimt forces the plain CUDA-core path (the correctness baseline for every dtype);
// kTensorCore forces the mma.sync kernels; kWgmma forces the synchronous wgmma kernels
// (d = 64) in both directions; kWgmmaWs forces the warp-specialised kernels (d = 64 or 128,
// both directions). Forcing a path where it cannot run is refused.
// The dev bench times the forced paths against each other in one process.
enum class KernelPath : int32_t { kAuto = 0, kSimt = 1, kTensorCore = 2, kWgmma = 3, kWgmmaWs = 4 };

struct ForwardArgs {
  AttentionShape shape;
  const HeadSpec* heads = nullptr;  // host array of shape.heads entries
  TensorView q, k, v;               // inputs
  TensorView o;                     // output, written for every head (zeros for pruned)
  float* lse = nullptr;             // output, fp32 (B, H, T)
  KernelPath path = KernelPath::kAuto;
};

struct BackwardArgs {
  AttentionShape shape;
  const HeadSpec* heads = nullptr;
  TensorView q, k, v, o, d_o;  // forward inputs, forward output, output gradient
  const float* lse = nullptr;  // from the forward pass
  TensorView dq, dk, dv;       // outputs, fully overwritten
  void* workspace = nullptr;   // device scratch of BackwardWorkspaceBytes(shape) bytes
  KernelPath path = KernelPath::kAuto;
};

// Returns the scratch bytes the backward pass needs (fp32 dQ accumulator and rowsum(dO∘O)).
size_t BackwardWorkspaceBytes(const AttentionShape& shape);

// Returns a non-ok status iff the shape, head specs or views are unusable; launches nothing.
KernelStatus ValidateForward(const ForwardArgs& args);
KernelStatus ValidateBackward(const BackwardArgs& args);

// Returns the implementation HybridAttentionForward / HybridAttentionBackward runs for
// `args`: "wgmma-ws", "wgmma", "mma.sync" or "simt" ("refused" when args.path forces one that
// cannot run). Launches nothing; runs may record it (which kernels a training run used).
const char* ForwardPathName(const ForwardArgs& args);
const char* BackwardPathName(const BackwardArgs& args);

// Returns the head size the kernels run a d = `shape.head_dim` problem at: 128 for d = 96 in
// bf16/fp16 where the warp-specialised kernels can run (an sm_90a build on an sm_90 device,
// B*H*T*128 below 2^31), else shape.head_dim. Those kernels have no d = 96 form, and at d = 128
// they run the 1b preset's heads faster than mma.sync does at d = 96 (docs/BENCHMARKS.md,
// the AAH-v3 layer bench under Training). The caller pads Q, K, V and dO with zero columns up to
// this size: a zero column adds nothing to q.k, so the scores, the softmax and O's first d columns
// are unchanged, and the padded columns of O, dQ, dK and dV are zero. The softmax scale stays the
// caller's (1/sqrt(96), not 1/sqrt(128)).
int ExecutedHeadDim(const AttentionShape& shape);

// Launches the forward pass of all heads on `stream` (a cudaStream_t; nullptr = default).
KernelStatus HybridAttentionForward(const ForwardArgs& args, void* stream);

// Launches the backward pass (a few kernels: preprocess, main, dQ conversion) on `stream`.
KernelStatus HybridAttentionBackward(const BackwardArgs& args, void* stream);

}  // namespace kernels
}  // namespace headlab
