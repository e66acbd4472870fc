// decode_linear_bench.cu: dev bench of the decode step's linear layer (decode_linear.h)
// against cuBLAS in the same process.
//
// The 124M decode step's four weights (q/k/v 768 -> 2304, output 768 -> 768, MLP 768 -> 3072
// and 3072 -> 768), bf16, at M = 16 and 1 rows. First the numerics: ours and cuBLAS's
// (cublasGemmEx, bf16 in and out, fp32 compute) against a float64 CPU product of the same
// bf16 inputs, as relative L2 errors; ours must be within 2x cuBLAS's + 1e-3 (and with a
// bias, within 1e-2), else the bench exits 1. Then the time per launch, median of 11 rounds:
// each round is one CUDA graph of 96 launches cycling through copies of the weight that
// together exceed the H200's 50 MB L2 (a decode step reads its 247 MB of weights from
// memory, not L2), replayed once, divided by 96: a kernel's time plus the gap between two
// kernels of a graph, as in the captured decode step. GB/s counts the weight bytes. The MLP's
// first layer is also checked and timed with its GELU applied in the kernel (cuBLAS then
// needs a second kernel, which the decoder's cuBLAS path runs; not timed here). Ours is
// launched with PDL as the decoder launches it; the last rows without.
//
//   cmake -S . -B /tmp/kb -DHEADLAB_ONLY=kernels && cmake --build /tmp/kb -j
//   /tmp/kb/kernels/decode_linear_bench
// or alone: nvcc -std=c++17 -O3 -arch=sm_90a -I. kernels/decode_linear.cu
//   kernels/dev/decode_linear_bench.cu -lcublas -o /tmp/decode_linear_bench
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "kernels/decode_linear.h"
#include "kernels/testing/attention_harness.cuh"  // DeviceBuffer, HEADLAB_CUDA_CHECK_OR_EXIT

namespace headlab {
namespace kernels {
namespace {

using testing::DeviceBuffer;

#define CUBLAS_OK(expr)                                                                           \
  do {                                                                                            \
    cublasStatus_t _s = (expr);                                                                   \
    if (_s != CUBLAS_STATUS_SUCCESS) {                                                            \
      std::fprintf(stderr, "cuBLAS error %d at %s:%d: %s\n", int(_s), __FILE__, __LINE__, #expr); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

float Bf16Round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

std::vector<__nv_bfloat16> ToBf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16_rn(v[i]);
  return out;
}

void Upload(DeviceBuffer& dst, const std::vector<__nv_bfloat16>& src) {
  HEADLAB_CUDA_CHECK_OR_EXIT(
      cudaMemcpy(dst.ptr, src.data(), src.size() * 2, cudaMemcpyHostToDevice));
}

std::vector<float> Download(const DeviceBuffer& src, size_t n) {
  std::vector<__nv_bfloat16> h(n);
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(h.data(), src.ptr, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(h[i]);
  return out;
}

double RelL2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// y [M, N] = x [M, K] W [N, K]^T through cuBLAS (column-major: y^T = W x^T).
void CublasLinear(cublasHandle_t h, int M, int N, int K, const void* x, const void* w, void* y) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_OK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, CUDA_R_16BF, K, x,
                         CUDA_R_16BF, K, &zero, y, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
}

DecodeLinearArgs Args(int M, int N, int K, const void* x, const void* w, const void* bias,
                      void* y) {
  DecodeLinearArgs a;
  a.rows = M;
  a.in = K;
  a.out = N;
  a.x = x;
  a.x_stride = K;
  a.w = w;
  a.w_stride = K;
  a.bias = bias;
  a.y = y;
  a.y_stride = N;
  return a;
}

void Ours(const DecodeLinearArgs& a, cudaStream_t s) {
  const KernelStatus st = DecodeLinear(a, s);
  if (!st.ok()) {
    std::fprintf(stderr, "decode_linear refused: %s\n", st.message);
    std::exit(1);
  }
}

double Gelu(double y) { return 0.5 * y * (1.0 + std::erf(y / std::sqrt(2.0))); }

// Ours and cuBLAS against float64 on the host; returns false on a miss. gelu: ours applies
// GELU (erf) in its epilogue, against GELU of the float64 product.
bool Check(cublasHandle_t h, const char* name, int M, int N, int K, bool with_bias,
           bool gelu = false) {
  std::mt19937 rng(N * 31 + K + M);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(size_t(M) * K), w(size_t(N) * K), bias(static_cast<size_t>(N));
  for (float& v : x) v = Bf16Round(normal(rng));
  for (float& v : w) v = Bf16Round(normal(rng) / std::sqrt(float(K)));
  for (float& v : bias) v = Bf16Round(normal(rng));
  std::vector<double> want(size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = with_bias ? bias[size_t(n)] : 0.0;
      for (int k = 0; k < K; ++k) s += double(x[size_t(m) * K + k]) * w[size_t(n) * K + k];
      want[size_t(m) * N + n] = gelu ? Gelu(s) : s;
    }
  DeviceBuffer dx(x.size() * 2), dw(w.size() * 2), db(bias.size() * 2), dy(want.size() * 2),
      dc(want.size() * 2);
  Upload(dx, ToBf16(x));
  Upload(dw, ToBf16(w));
  Upload(db, ToBf16(bias));
  DecodeLinearArgs args = Args(M, N, K, dx.ptr, dw.ptr, with_bias ? db.ptr : nullptr, dy.ptr);
  if (gelu) args.activation = DecodeActivation::kGelu;
  Ours(args, nullptr);
  CublasLinear(h, M, N, K, dx.ptr, dw.ptr, dc.ptr);
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaDeviceSynchronize());
  const double ours = RelL2(Download(dy, want.size()), want);
  const double theirs = RelL2(Download(dc, want.size()), want);
  // cuBLAS's product has no bias or GELU here: compare it only without them.
  const bool ok = with_bias || gelu ? ours <= 1e-2 : ours <= 2 * theirs + 1e-3;
  if (with_bias || gelu)
    std::printf("%-22s M=%2d %-7s rel L2 vs float64: ours %.2e                    %s\n", name, M,
                gelu ? "+ GELU" : "+ bias", ours, ok ? "ok" : "MISSED");
  else
    std::printf("%-22s M=%2d         rel L2 vs float64: ours %.2e, cuBLAS %.2e  %s\n", name, M,
                ours, theirs, ok ? "ok" : "MISSED");
  return ok;
}

// Median us per launch of `launch(i)` for i = 0..95, captured as one graph (see the header).
template <typename Launch>
double TimeGraph(cudaStream_t s, Launch&& launch) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 96; ++i) launch(i);
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaStreamEndCapture(s, &graph));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventCreate(&e0));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventCreate(&e1));
  std::vector<float> us;
  for (int round = 0; round < 13; ++round) {
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventRecord(e0, s));
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaGraphLaunch(exec, s));
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventRecord(e1, s));
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventSynchronize(e1));
    float ms = 0;
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventElapsedTime(&ms, e0, e1));
    if (round >= 2) us.push_back(ms * 1000.f / 96.f);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// gelu: ours with GELU in its epilogue (the row says so); cuBLAS's product alone. overlap:
// ours launched with PDL (each launch's first weights load while the one before runs, as in
// the decode step), else as an ordinary launch ("no PDL").
void Time(cublasHandle_t h, cudaStream_t s, const char* name, int M, int N, int K,
          bool gelu = false, bool overlap = true) {
  const size_t weight_bytes = size_t(N) * K * 2;
  const int copies = int(std::max<size_t>(2, (160u << 20) / weight_bytes));  // > 3x the L2
  DeviceBuffer x(size_t(M) * K * 2), y(size_t(M) * N * 2), w(weight_bytes * copies);
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemset(x.ptr, 0x3c, x.bytes));  // bf16 ~0.011
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemset(w.ptr, 0x3c, w.bytes));
  auto weight = [&](int i) {
    return static_cast<char*>(w.ptr) + weight_bytes * size_t(i % copies);
  };
  const double ours = TimeGraph(s, [&](int i) {
    DecodeLinearArgs a = Args(M, N, K, x.ptr, weight(i), nullptr, y.ptr);
    if (gelu) a.activation = DecodeActivation::kGelu;
    a.overlap_previous = overlap;
    Ours(a, s);
  });
  CUBLAS_OK(cublasSetStream(h, s));
  CublasLinear(h, M, N, K, x.ptr, weight(0),
               y.ptr);  // its first call allocates, outside the capture
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaStreamSynchronize(s));
  const double theirs =
      TimeGraph(s, [&](int i) { CublasLinear(h, M, N, K, x.ptr, weight(i), y.ptr); });
  auto gbs = [&](double us) { return weight_bytes / (us * 1e-6) / 1e9; };
  std::printf(
      "%-22s M=%2d %s  %5.2f MB  ours %6.2f us (%6.0f GB/s)  cuBLAS %6.2f us (%6.0f GB/s)  "
      "ours/cuBLAS %.3f\n",
      name, M,
      gelu      ? "+ GELU  "
      : overlap ? "        "
                : "no PDL  ",
      weight_bytes / 1e6, ours, gbs(ours), theirs, gbs(theirs), ours / theirs);
}

}  // namespace
}  // namespace kernels
}  // namespace headlab

int main() {
  using namespace headlab::kernels;
  struct Shape {
    const char* name;
    int N, K;
  };
  const Shape shapes[] = {{"q/k/v 768 -> 2304", 2304, 768},
                          {"output 768 -> 768", 768, 768},
                          {"MLP up 768 -> 3072", 3072, 768},
                          {"MLP down 3072 -> 768", 768, 3072}};
  cublasHandle_t h;
  CUBLAS_OK(cublasCreate(&h));
  cudaStream_t s;
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  bool ok = true;
  std::printf("numerics (bf16 inputs, float64 reference)\n");
  for (const Shape& sh : shapes)
    for (int M : {16, 5, 1})
      for (bool bias : {false, true}) ok = Check(h, sh.name, M, sh.N, sh.K, bias) && ok;
  for (int M : {16, 1})
    ok = Check(h, shapes[2].name, M, shapes[2].N, shapes[2].K, true, /*gelu=*/true) && ok;
  std::printf(
      "time per launch, one graph of 96 launches over weights past the L2 (median of 11)\n");
  for (int M : {16, 1})
    for (const Shape& sh : shapes) Time(h, s, sh.name, M, sh.N, sh.K);
  Time(h, s, shapes[2].name, 16, shapes[2].N, shapes[2].K, /*gelu=*/true);
  for (const Shape& sh : shapes)
    Time(h, s, sh.name, 16, sh.N, sh.K, /*gelu=*/false, /*overlap=*/false);
  cublasDestroy(h);
  std::printf(ok ? "numerics: all within bounds\n" : "numerics: MISSED (above)\n");
  return ok ? 0 : 1;
}
