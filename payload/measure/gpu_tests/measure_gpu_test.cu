// measure_gpu_test: the device-machine checks of the measurement library (ctest label gpu).
//
//  1. Known kernel: every thread runs `iters` rounds of one FFMA, one FADD, one FMUL
//     (the _rn intrinsics are never contracted or reassociated), so the FP32 counters must
//     read exactly threads*iters each and fp32 FLOPs = 4*threads*iters; the kernel runs in
//     nested ranges outer/known, whose paths and counts must come back.
//  2. Calibration: cuBLAS GEMMs of known shape in bf16, fp16 and tf32 (fp32 accumulate);
//     every tensor metric candidate is evaluated against 2*M*N*K, and the default set (the
//     first) must be within 1% for all three.
//  3. Kernel trace and CUDA-event regions: the known kernel's record joins to its range.
//
// Prints a JSON summary (and writes it to $HEADLAB_MEASURE_OUT/measure_gpu.json if set).
// Exit status 0 iff every check passed.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/gpu_check.h"
#include "payload/measure/counter_session.h"
#include "payload/measure/flop_counter.h"
#include "payload/measure/flop_formula.h"
#include "payload/measure/gpu_presence.h"
#include "payload/measure/kernel_trace.h"
#include "payload/measure/region_timer.h"

using namespace headlab;
using namespace headlab::measure;

namespace {

int g_failures = 0;
Json g_summary;

void Check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) g_failures++;
}

// A failed CUDA call ends the test (common/gpu_check.h says which call, where, and why).
#define CUDA_OK(call)                                             \
  do {                                                            \
    const ::headlab::Status cuda_ok_ = HEADLAB_CUDA_STATUS(call); \
    if (!cuda_ok_.ok()) {                                         \
      std::printf("FAIL %s\n", cuda_ok_.message().c_str());       \
      std::exit(1);                                               \
    }                                                             \
  } while (0)

__global__ void KnownFp32(const float* in, float* out, int iters, float a, float b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float x = in[i], y = in[i], z = in[i];
  for (int r = 0; r < iters; ++r) {
    x = __fmaf_rn(x, a, b);
    y = __fadd_rn(y, b);
    z = __fmul_rn(z, a);
  }
  out[3 * i] = x;
  out[3 * i + 1] = y;
  out[3 * i + 2] = z;
}

template <typename T>
__global__ void Fill(T* p, size_t n) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = T(float((i * 2654435761u) % 17) / 17.0f - 0.5f);
}

constexpr int kBlocks = 264, kThreads = 256, kIters = 1000;

void TestKnownKernel() {
  const int n = kBlocks * kThreads;
  float *in = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&in, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&out, 3 * n * sizeof(float)));
  Fill<float><<<(n + 255) / 256, 256>>>(in, n);
  CUDA_OK(cudaDeviceSynchronize());
  auto body = [&]() -> Status {
    ScopedRange outer("outer");
    ScopedRange known("known");
    KnownFp32<<<kBlocks, kThreads>>>(in, out, kIters, 1.0001f, 0.5f);
    return cudaGetLastError() == cudaSuccess ? Status::Ok() : Status::Internal("launch failed");
  };
  StatusOr<FlopReport> r = MeasureFlops(body, nullptr, TensorMetricCandidates()[0]);
  Check(r.ok(),
        "known kernel: MeasureFlops " + (r.ok() ? std::string("ran") : r.status().ToString()));
  if (!r.ok()) return;
  Check(r->measured(), "known kernel: measured (" + r->unmeasured + ")");
  if (!r->measured()) return;
  const double expected = 4.0 * double(n) * kIters;
  auto it = r->ranges.find("outer/known");
  Check(it != r->ranges.end(), "known kernel: range outer/known reported");
  Check(r->ranges.count("outer") == 1, "known kernel: range outer reported");
  if (it != r->ranges.end()) {
    Check(it->second.fp32 == expected, "known kernel: fp32 " + std::to_string(it->second.fp32) +
                                           " == analytic " + std::to_string(expected));
    Check(it->second.tensor == 0 && it->second.half == 0, "known kernel: no tensor or half FLOPs");
    Check(r->ranges["outer"].fp32 == expected, "known kernel: outer holds the same count");
  }
  g_summary["known_kernel"] = FlopReportJson(*r);
  g_summary["known_kernel"]["analytic_fp32"] = expected;

  // Activity API + events on the same body.
  StatusOr<std::unique_ptr<KernelTrace>> trace = KernelTrace::Start();
  Check(trace.ok(),
        "kernel trace: started " + (trace.ok() ? std::string() : trace.status().ToString()));
  if (!trace.ok()) return;
  RegionTimer timer;
  TeeMarker tee({trace->get(), &timer});
  SetActiveMarker(&tee);
  (void)body();
  SetActiveMarker(nullptr);
  StatusOr<KernelTraceResult> tr = (*trace)->Finish();
  Check(tr.ok(), "kernel trace: finished " + (tr.ok() ? std::string() : tr.status().ToString()));
  StatusOr<std::map<std::string, double>> ms = timer.Elapsed();
  Check(ms.ok() && (*ms)["outer/known"] > 0, "region timer: outer/known > 0 ms");
  if (tr.ok()) {
    const RangeKernelStats& s = tr->join.ranges["outer/known"];
    Check(s.kernels == 1,
          "kernel trace: 1 kernel joined to outer/known (got " + std::to_string(s.kernels) + ")");
    Check(s.kernel_ns > 0, "kernel trace: kernel time > 0");
    g_summary["trace"] = {{"kernel_ns", s.kernel_ns},
                          {"busy_ns", s.busy_ns},
                          {"event_ms", ms.ok() ? (*ms)["outer/known"] : -1.0},
                          {"unattributed", tr->join.unattributed_kernels},
                          {"unmatched", tr->join.unmatched_kernels}};
  }
  cudaFree(in);
  cudaFree(out);
}

struct Gemm {
  const char* name;
  cudaDataType_t type;
  cublasComputeType_t compute;
};

void TestGemmCalibration() {
  const int m = 4096, n = 4096, k = 4096;
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    Check(false, "cublasCreate");
    return;
  }
  void *a = nullptr, *b = nullptr, *c = nullptr;
  const size_t elems = size_t(m) * k;
  CUDA_OK(cudaMalloc(&a, elems * 4));
  CUDA_OK(cudaMalloc(&b, elems * 4));
  CUDA_OK(cudaMalloc(&c, size_t(m) * n * 4));
  const Gemm gemms[] = {{"gemm_bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F},
                        {"gemm_fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F},
                        {"gemm_tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32}};
  const float alpha = 1, beta = 0;
  auto run = [&](const Gemm& g) -> Status {
    // Inputs filled in their own type so the tensor cores see ordinary numbers.
    cublasStatus_t st =
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, g.type, m, b, g.type, k,
                     &beta, c, CUDA_R_32F, m, g.compute, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? Status::Ok()
                                       : Status::Internal(std::string("cublasGemmEx ") + g.name);
  };
  Fill<__nv_bfloat16><<<(elems + 255) / 256, 256>>>(static_cast<__nv_bfloat16*>(a), elems);
  Fill<__nv_bfloat16><<<(elems + 255) / 256, 256>>>(static_cast<__nv_bfloat16*>(b), elems);
  CUDA_OK(cudaDeviceSynchronize());
  // Warm-up (cuBLAS picks and loads its kernels), then the plain wall time for overhead.
  for (const Gemm& g : gemms) (void)run(g);
  CUDA_OK(cudaDeviceSynchronize());
  auto body = [&]() -> Status {
    for (const Gemm& g : gemms) {
      ScopedRange r(g.name);
      HEADLAB_RETURN_IF_ERROR(run(g));
    }
    return Status::Ok();
  };
  const auto t0 = std::chrono::steady_clock::now();
  (void)body();
  CUDA_OK(cudaDeviceSynchronize());
  const double plain_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  CounterOptions opt;
  for (const TensorMetricSet& s : TensorMetricCandidates())
    for (const MetricTerm& t : s.terms) {
      bool seen = false;
      for (const std::string& x : opt.metrics) seen = seen || x == t.metric;
      if (!seen) opt.metrics.push_back(t.metric);
    }
  for (const MetricTerm& t : Fp32Terms()) opt.metrics.push_back(t.metric);
  StatusOr<std::unique_ptr<CounterSession>> session = CounterSession::Open(opt);
  Check(session.ok(), "calibration: session " +
                          (session.ok() ? std::string("open") : session.status().ToString()));
  if (!session.ok()) return;
  StatusOr<CounterRun> cr = (*session)->Run(body, nullptr);
  Check(cr.ok(), "calibration: run " + (cr.ok() ? std::string("ok") : cr.status().ToString()));
  if (!cr.ok()) return;
  auto sums = SumByPath(cr->ranges);
  const double expected = 2.0 * m * n * k;
  Json cal;
  cal["shape"] = {m, n, k};
  cal["expected"] = expected;
  cal["passes"] = cr->passes;
  cal["profiled_s"] = cr->profiled_s;
  cal["plain_s"] = plain_s;
  cal["overhead_x"] = cr->profiled_s / plain_s;
  cal["metrics"] = opt.metrics.size();
  for (size_t i = 0; i < TensorMetricCandidates().size(); ++i) {
    const TensorMetricSet& s = TensorMetricCandidates()[i];
    bool all = true;
    for (const Gemm& g : gemms) {
      StatusOr<double> v = EvaluateTerms(s.terms, sums[g.name]);
      double err = v.ok() ? CalibrationError(*v, m, n, k) : 1e9;
      cal["candidates"][s.name][g.name] = {{"count", v.ok() ? *v : -1.0}, {"rel_error", err}};
      all = all && err <= 0.01;
    }
    cal["candidates"][s.name]["within_1pct"] = all;
    if (i == 0)
      Check(all, "calibration: default tensor set " + s.name +
                     " within 1% of 2MNK for bf16, fp16, tf32");
  }
  for (const Gemm& g : gemms) {
    StatusOr<double> f = EvaluateTerms(Fp32Terms(), sums[g.name]);
    cal["fp32_flops"][g.name] = f.ok() ? *f : -1.0;
  }
  std::printf("calibration passes=%d profiled=%.3fs plain=%.4fs\n", cr->passes, cr->profiled_s,
              plain_s);
  g_summary["calibration"] = cal;
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

}  // namespace

int main() {
  std::string no_gpu = NoGpuReason();
  if (!no_gpu.empty()) {
    std::printf("FAIL %s (this test runs on the device machine)\n", no_gpu.c_str());
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  g_summary["device"] = prop.name;
  TestKnownKernel();
  TestGemmCalibration();
  g_summary["failures"] = g_failures;
  std::string text = g_summary.dump(2);
  std::printf("%s\n", text.c_str());
  if (const char* dir = std::getenv("HEADLAB_MEASURE_OUT")) {
    std::ofstream(std::string(dir) + "/measure_gpu.json") << text << "\n";
  }
  std::printf("%s\n", g_failures ? "FAILED" : "PASSED");
  return g_failures ? 1 : 0;
}
