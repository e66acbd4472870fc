// FLOPs from CUPTI counters: which counters to collect and how to combine them. Torch-free
// and CUPTI-free (the formulas are tested on any machine).
//
// Non-tensor FLOPs follow Nsight Compute's roofline: one FLOP per predicated-on thread
// add or multiply instruction and two per fused multiply-add,
//   fp32 = fadd + fmul + 2 * ffma,  half (fp16/bf16) = hadd + hmul + 2 * hfma,
//   fp64 = dadd + dmul + 2 * dfma
// (a packed HFMA2 counts as one thread instruction there, as in Nsight Compute). Tensor-core
// FLOPs come from the `sm__ops_path_tensor_src_*` operation counters, whose scale is
// checked against cuBLAS GEMMs of known shape (CalibrationError; gpu test
// measure_gpu_test) before any count is reported.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab::measure {

// One counter and the FLOPs each of its events stands for.
struct MetricTerm {
  std::string metric;  // a CUPTI metric with rollup, e.g. "sm__..._ffma_pred_on.sum"
  double weight;
};

// A named way to count tensor-core FLOPs: sum of weight * counter.
struct TensorMetricSet {
  std::string name;
  std::vector<MetricTerm> terms;
};

// FLOPs of one range, by kind; total = fp32 + half + fp64 + tensor.
struct FlopCounts {
  double fp32 = 0, half = 0, fp64 = 0, tensor = 0, total = 0;
  FlopCounts& operator+=(const FlopCounts& o);
};

const std::vector<MetricTerm>& Fp32Terms();
const std::vector<MetricTerm>& HalfTerms();
const std::vector<MetricTerm>& Fp64Terms();

// The tensor-core metric sets the calibration chooses among (first = the default used
// by the flops run kind; the gpu test fails if it misses 2*M*N*K by more than 1%).
const std::vector<TensorMetricSet>& TensorMetricCandidates();
// Returns the candidate named `name`, or NotFound listing the names.
StatusOr<TensorMetricSet> FindTensorMetricSet(const std::string& name);

// Returns every counter the FLOP formulas need with `tensor`, each once, in a fixed order.
std::vector<std::string> FlopMetricNames(const TensorMetricSet& tensor);

// Returns sum(weight * values[metric]) over `terms`; NotFound naming the first missing
// counter.
StatusOr<double> EvaluateTerms(const std::vector<MetricTerm>& terms,
                               const std::map<std::string, double>& values);

// Assembles the FLOP counts of one range from its counter values.
StatusOr<FlopCounts> AssembleFlops(const std::map<std::string, double>& values,
                                   const TensorMetricSet& tensor);

// Returns the relative error |measured - 2*M*N*K| / (2*M*N*K) of a GEMM's tensor count.
double CalibrationError(double measured, double m, double n, double k);

}  // namespace headlab::measure
