// attention_harness.cuh: builds one hybrid-head problem on the device (random inputs in the
// kernel dtype, optional non-contiguous layouts, fixed-head priors), runs the kernels and
// compares them with the CPU reference. Shared by the GPU test and the dev bench; header
// only because each of them is one translation unit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/hybrid_attention.h"
#include "kernels/reference.h"

// The one CUDA-check macro of the kernel tools: prints file:line and exits (dev tools
// only; library code returns a KernelStatus instead, and host code outside kernels/ uses
// common/gpu_check.h, which returns a Status).
#define HEADLAB_CUDA_CHECK_OR_EXIT(expr)                                                     \
  do {                                                                                       \
    cudaError_t _e = (expr);                                                                 \
    if (_e != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(_e), __FILE__, \
                   __LINE__, #expr);                                                         \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

namespace headlab {
namespace kernels {
namespace testing {

// How Q/K/V sit in memory: contiguous (B,T,H,d); packed = slices of one (B,T,H+2G,d) QKV
// projection output; head-major = (B,H,T,d) viewed as (B,T,H,d).
enum class Layout { kContiguous, kPackedQkv, kHeadMajor };

inline const char* LayoutName(Layout l) {
  return l == Layout::kContiguous ? "contig" : l == Layout::kPackedQkv ? "packed" : "headmajor";
}
inline const char* DTypeName(DType d) {
  return d == DType::kF32 ? "fp32" : d == DType::kBF16 ? "bf16" : "fp16";
}
inline Rounding RoundingOf(DType d) {
  return d == DType::kF32 ? Rounding::kNone : d == DType::kBF16 ? Rounding::kBF16 : Rounding::kF16;
}

// A device buffer of raw bytes.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaMalloc(&ptr, n ? n : 1));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
};

inline uint16_t ToHalfBits(float x, DType d) {
  if (d == DType::kBF16) {
    __nv_bfloat16 v = __float2bfloat16_rn(x);
    uint16_t u;
    std::memcpy(&u, &v, 2);
    return u;
  }
  __half v = __float2half_rn(x);
  uint16_t u;
  std::memcpy(&u, &v, 2);
  return u;
}
inline float FromHalfBits(uint16_t u, DType d) {
  if (d == DType::kBF16) {
    __nv_bfloat16 v;
    std::memcpy(&v, &u, 2);
    return __bfloat162float(v);
  }
  __half v;
  std::memcpy(&v, &u, 2);
  return __half2float(v);
}

struct ProblemConfig {
  int B = 1, T = 128, H = 4, G = 4, d = 64;
  DType dtype = DType::kF32;
  Layout layout = Layout::kContiguous;
  std::vector<HeadSpec> heads;  // fixed heads' pointers are filled in by Problem
  uint32_t seed = 1;
  // Adds +75 to rho at offset 70 of every fixed head: rows that cannot reach that offset
  // then exercise the kernels' exact-exp fallback of the product form.
  bool spiky_prior = false;
  float scale() const { return 1.f / std::sqrt(float(d)); }
};

// One problem: host inputs (exactly the values the device sees, i.e. already rounded to
// the dtype) and device buffers for every input and output.
class Problem {
 public:
  explicit Problem(const ProblemConfig& c) : c_(c) {
    std::mt19937 rng(c.seed);
    std::normal_distribution<float> n01(0.f, 1.f);
    const Rounding r = RoundingOf(c.dtype);
    auto fill = [&](std::vector<float>& v, size_t n) {
      v.resize(n);
      for (float& x : v) x = RoundTo(n01(rng), r);
    };
    const size_t nq = size_t(c.B) * c.T * c.H * c.d, nkv = size_t(c.B) * c.T * c.G * c.d;
    fill(q_, nq);
    fill(k_, nkv);
    fill(v_, nkv);
    fill(d_o_, nq);
    // One stored prior per head, longer than T like SAF App. D.2 (prior 192 at T = 129).
    const int prior = c.T + 63;
    heads_host_ = c.heads;
    alpha_.assign(size_t(c.H) * prior, 0.f);
    rho_.assign(size_t(c.H) * prior, 0.f);
    log_z_.assign(size_t(c.H) * prior, 0.f);
    for (int h = 0; h < c.H; ++h) {
      if (c.heads[h].state != HeadState::kFixed) continue;
      float* a = &alpha_[size_t(h) * prior];
      float* rh = &rho_[size_t(h) * prior];
      for (int i = 0; i < prior; ++i) {
        a[i] = n01(rng);
        rh[i] = -0.05f * std::min(i, 200) + 0.5f * n01(rng);  // decaying with distance
      }
      a[0] += 3.f;  // an attention sink
      if (c.spiky_prior && prior > 70) rh[70] += 75.f;
      FixedLogZ(a, rh, prior, &log_z_[size_t(h) * prior]);
    }
    prior_ = prior;
    alpha_d_ = Upload(alpha_);
    rho_d_ = Upload(rho_);
    log_z_d_ = Upload(log_z_);
    heads_dev_ = heads_host_;
    for (int h = 0; h < c.H; ++h) {
      if (heads_host_[h].state != HeadState::kFixed) continue;
      heads_host_[h].alpha = &alpha_[size_t(h) * prior];
      heads_host_[h].rho = &rho_[size_t(h) * prior];
      heads_host_[h].log_z = &log_z_[size_t(h) * prior];
      heads_dev_[h].alpha = static_cast<float*>(alpha_d_.ptr) + size_t(h) * prior;
      heads_dev_[h].rho = static_cast<float*>(rho_d_.ptr) + size_t(h) * prior;
      heads_dev_[h].log_z = static_cast<float*>(log_z_d_.ptr) + size_t(h) * prior;
    }
    // Inputs in the requested layout.
    const size_t es = DTypeSize(c.dtype);
    const int64_t d = c.d;
    if (c.layout == Layout::kPackedQkv) {
      const int64_t width = int64_t(c.H + 2 * c.G) * d;
      qkv_ = DeviceBuffer(size_t(c.B) * c.T * width * es);
      char* base = static_cast<char*>(qkv_.ptr);
      qv_ = {base, c.T * width, width, d};
      kv_ = {base + c.H * d * es, c.T * width, width, d};
      vv_ = {base + (c.H + c.G) * d * es, c.T * width, width, d};
    } else {
      qkv_ = DeviceBuffer((nq + 2 * nkv) * es);
      char* base = static_cast<char*>(qkv_.ptr);
      qv_ = Dense(base, c.H);
      kv_ = Dense(base + nq * es, c.G);
      vv_ = Dense(base + (nq + nkv) * es, c.G);
    }
    {
      std::vector<char> image(qkv_.bytes, 0);
      Scatter(q_, qv_, c.H, qkv_.ptr, &image);
      Scatter(k_, kv_, c.G, qkv_.ptr, &image);
      Scatter(v_, vv_, c.G, qkv_.ptr, &image);
      HEADLAB_CUDA_CHECK_OR_EXIT(
          cudaMemcpy(qkv_.ptr, image.data(), image.size(), cudaMemcpyHostToDevice));
    }
    o_ = DeviceBuffer(nq * es);
    d_o_buf_ = DeviceBuffer(nq * es);
    dq_ = DeviceBuffer(nq * es);
    dk_ = DeviceBuffer(nkv * es);
    dv_ = DeviceBuffer(nkv * es);
    lse_ = DeviceBuffer(size_t(c.B) * c.H * c.T * 4);
    ov_ = {o_.ptr, int64_t(c.T) * c.H * d, int64_t(c.H) * d, d};
    dov_ = {d_o_buf_.ptr, int64_t(c.T) * c.H * d, int64_t(c.H) * d, d};
    dqv_ = {dq_.ptr, int64_t(c.T) * c.H * d, int64_t(c.H) * d, d};
    dkv_ = {dk_.ptr, int64_t(c.T) * c.G * d, int64_t(c.G) * d, d};
    dvv_ = {dv_.ptr, int64_t(c.T) * c.G * d, int64_t(c.G) * d, d};
    {
      std::vector<char> image(d_o_buf_.bytes, 0);
      Scatter(d_o_, dov_, c.H, d_o_buf_.ptr, &image);
      HEADLAB_CUDA_CHECK_OR_EXIT(
          cudaMemcpy(d_o_buf_.ptr, image.data(), image.size(), cudaMemcpyHostToDevice));
    }
    AttentionShape s;
    s.batch = c.B;
    s.seq_len = c.T;
    s.heads = c.H;
    s.kv_heads = c.G;
    s.head_dim = c.d;
    s.scale = c.scale();
    s.dtype = c.dtype;
    workspace_ = DeviceBuffer(BackwardWorkspaceBytes(s));
    shape_ = s;
  }

  ForwardArgs Forward(KernelPath path) const {
    ForwardArgs a;
    a.shape = shape_;
    a.heads = heads_dev_.data();
    a.q = qv_;
    a.k = kv_;
    a.v = vv_;
    a.o = ov_;
    a.lse = static_cast<float*>(lse_.ptr);
    a.path = path;
    return a;
  }
  BackwardArgs Backward(KernelPath path) const {
    BackwardArgs a;
    a.shape = shape_;
    a.heads = heads_dev_.data();
    a.q = qv_;
    a.k = kv_;
    a.v = vv_;
    a.o = ov_;
    a.d_o = dov_;
    a.lse = static_cast<const float*>(lse_.ptr);
    a.dq = dqv_;
    a.dk = dkv_;
    a.dv = dvv_;
    a.workspace = workspace_.ptr;
    a.path = path;
    return a;
  }
  // Fills every output with 0xFF bytes (NaN in each dtype) so unwritten elements show.
  void PoisonOutputs() {
    for (DeviceBuffer* b : {&o_, &dq_, &dk_, &dv_, &lse_})
      HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemset(b->ptr, 0xff, b->bytes));
  }
  std::vector<float> O() const { return Gather(ov_, c_.H); }
  std::vector<float> DQ() const { return Gather(dqv_, c_.H); }
  std::vector<float> DK() const { return Gather(dkv_, c_.G); }
  std::vector<float> DV() const { return Gather(dvv_, c_.G); }
  std::vector<float> Lse() const {
    std::vector<float> out(size_t(c_.B) * c_.H * c_.T);
    HEADLAB_CUDA_CHECK_OR_EXIT(
        cudaMemcpy(out.data(), lse_.ptr, out.size() * 4, cudaMemcpyDeviceToHost));
    return out;
  }
  ReferenceProblem Reference() const {
    return {shape_, heads_host_.data(), q_.data(), k_.data(), v_.data()};
  }
  const std::vector<float>& d_o() const { return d_o_; }
  const ProblemConfig& config() const { return c_; }
  const AttentionShape& shape() const { return shape_; }

 private:
  TensorView Dense(char* base, int heads) const {
    const int64_t d = c_.d;
    if (c_.layout == Layout::kHeadMajor)
      return {base, int64_t(heads) * c_.T * d, d, int64_t(c_.T) * d};
    return {base, int64_t(c_.T) * heads * d, int64_t(heads) * d, d};
  }
  static DeviceBuffer Upload(const std::vector<float>& v) {
    DeviceBuffer b(v.size() * 4);
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(b.ptr, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return b;
  }
  // Writes a contiguous host (B,T,heads,d) tensor into `image`, the host copy of the device
  // allocation starting at `base` that holds the strided view v.
  void Scatter(const std::vector<float>& host, const TensorView& v, int heads, void* base,
               std::vector<char>* image) {
    const size_t es = DTypeSize(c_.dtype);
    const size_t offset = static_cast<char*>(v.data) - static_cast<char*>(base);
    for (int b = 0; b < c_.B; ++b)
      for (int t = 0; t < c_.T; ++t)
        for (int h = 0; h < heads; ++h) {
          const float* src = &host[((size_t(b) * c_.T + t) * heads + h) * c_.d];
          char* dst =
              image->data() + offset + (b * v.stride_b + t * v.stride_t + h * v.stride_h) * es;
          if (c_.dtype == DType::kF32) {
            std::memcpy(dst, src, c_.d * 4);
          } else {
            for (int i = 0; i < c_.d; ++i) {
              uint16_t u = ToHalfBits(src[i], c_.dtype);
              std::memcpy(dst + i * 2, &u, 2);
            }
          }
        }
  }
  std::vector<float> Gather(const TensorView& v, int heads) const {  // contiguous views only
    const size_t n = size_t(c_.B) * c_.T * heads * c_.d;
    std::vector<float> out(n);
    if (c_.dtype == DType::kF32) {
      HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(out.data(), v.data, n * 4, cudaMemcpyDeviceToHost));
    } else {
      std::vector<uint16_t> tmp(n);
      HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(tmp.data(), v.data, n * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n; ++i) out[i] = FromHalfBits(tmp[i], c_.dtype);
    }
    return out;
  }

  ProblemConfig c_;
  AttentionShape shape_;
  int prior_ = 0;
  std::vector<float> q_, k_, v_, d_o_, alpha_, rho_, log_z_;
  std::vector<HeadSpec> heads_host_, heads_dev_;
  DeviceBuffer alpha_d_, rho_d_, log_z_d_, qkv_, o_, d_o_buf_, dq_, dk_, dv_, lse_, workspace_;
  TensorView qv_, kv_, vv_, ov_, dov_, dqv_, dkv_, dvv_;
};

// Head-state mixes of the SAF App. D.2 sweep (empty, partial, full replacement) plus
// streaming/local/pruned heads. Returns H specs (fixed heads' pointers unset).
inline std::vector<HeadSpec> MakeMix(const std::string& mix, int H, int T) {
  std::vector<HeadSpec> heads(H);
  for (int h = 0; h < H; ++h) {
    HeadSpec& s = heads[h];
    if (mix == "ordinary") continue;
    if (mix == "fixed") {
      s.state = HeadState::kFixed;
      continue;
    }
    switch (h % 5) {  // "mixed"
      case 0:
        break;
      case 1:
        s.state = HeadState::kFixed;
        break;
      case 2:
        s.state = HeadState::kLocal;
        s.window = std::max(1, T / 5 + h);
        break;
      case 3:
        s.state = HeadState::kStreaming;
        s.sink = 4 + h;
        s.recent = std::max(1, T / 7);
        break;
      case 4:
        s.state = HeadState::kPruned;
        break;
    }
  }
  return heads;
}

}  // namespace testing
}  // namespace kernels
}  // namespace headlab
