// The FLOP formulas over CUPTI counter values.
#include "payload/measure/flop_formula.h"

#include <cmath>

namespace headlab::measure {
namespace {

std::string ThreadInst(const char* op) {
  return std::string("sm__sass_thread_inst_executed_op_") + op + "_pred_on.sum";
}

// Tensor-core operation counters per source type on Hopper (GH100 base metrics). The fp64
// DMMA path is left out: the models here never run fp64 matrix products.
const char* const kTensorSources[] = {
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp16.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp8.sum",
};

TensorMetricSet SourcesTimes(const std::string& name, double weight) {
  TensorMetricSet s{name, {}};
  for (const char* m : kTensorSources) s.terms.push_back({m, weight});
  return s;
}

}  // namespace

FlopCounts& FlopCounts::operator+=(const FlopCounts& o) {
  fp32 += o.fp32;
  half += o.half;
  fp64 += o.fp64;
  tensor += o.tensor;
  total += o.total;
  return *this;
}

const std::vector<MetricTerm>& Fp32Terms() {
  static const std::vector<MetricTerm> t = {
      {ThreadInst("fadd"), 1}, {ThreadInst("fmul"), 1}, {ThreadInst("ffma"), 2}};
  return t;
}

const std::vector<MetricTerm>& HalfTerms() {
  static const std::vector<MetricTerm> t = {
      {ThreadInst("hadd"), 1}, {ThreadInst("hmul"), 1}, {ThreadInst("hfma"), 2}};
  return t;
}

const std::vector<MetricTerm>& Fp64Terms() {
  static const std::vector<MetricTerm> t = {
      {ThreadInst("dadd"), 1}, {ThreadInst("dmul"), 1}, {ThreadInst("dfma"), 2}};
  return t;
}

const std::vector<TensorMetricSet>& TensorMetricCandidates() {
  // "ops_path_src" reads the counters as FLOPs (2 per multiply-add); "ops_path_src_x2"
  // as multiply-adds. The hgmma/hmma split counts the same work by instruction family.
  static const std::vector<TensorMetricSet> c = [] {
    std::vector<TensorMetricSet> v = {SourcesTimes("ops_path_src", 1.0),
                                      SourcesTimes("ops_path_src_x2", 2.0)};
    v.push_back({"ops_path_op_gmma_hmma",
                 {{"sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum", 1},
                  {"sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum", 1},
                  {"sm__ops_path_tensor_op_hgmma_src_fp16.sum", 1},
                  {"sm__ops_path_tensor_op_hmma_src_fp16.sum", 1},
                  {"sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum", 1},
                  {"sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum", 1}}});
    return v;
  }();
  return c;
}

StatusOr<TensorMetricSet> FindTensorMetricSet(const std::string& name) {
  std::string names;
  for (const TensorMetricSet& s : TensorMetricCandidates()) {
    if (s.name == name) return s;
    names += (names.empty() ? "" : ", ") + s.name;
  }
  return Status::NotFound("tensor metric set \"" + name + "\" is unknown (known: " + names + ")");
}

std::vector<std::string> FlopMetricNames(const TensorMetricSet& tensor) {
  std::vector<std::string> names;
  auto add = [&names](const std::vector<MetricTerm>& terms) {
    for (const MetricTerm& t : terms) {
      bool seen = false;
      for (const std::string& n : names) seen = seen || n == t.metric;
      if (!seen) names.push_back(t.metric);
    }
  };
  add(Fp32Terms());
  add(HalfTerms());
  add(Fp64Terms());
  add(tensor.terms);
  return names;
}

StatusOr<double> EvaluateTerms(const std::vector<MetricTerm>& terms,
                               const std::map<std::string, double>& values) {
  double sum = 0;
  for (const MetricTerm& t : terms) {
    auto it = values.find(t.metric);
    if (it == values.end()) return Status::NotFound("counter " + t.metric + " was not collected");
    sum += t.weight * it->second;
  }
  return sum;
}

StatusOr<FlopCounts> AssembleFlops(const std::map<std::string, double>& values,
                                   const TensorMetricSet& tensor) {
  FlopCounts f;
  StatusOr<double> fp32 = EvaluateTerms(Fp32Terms(), values);
  if (!fp32.ok()) return fp32.status();
  StatusOr<double> half = EvaluateTerms(HalfTerms(), values);
  if (!half.ok()) return half.status();
  StatusOr<double> fp64 = EvaluateTerms(Fp64Terms(), values);
  if (!fp64.ok()) return fp64.status();
  StatusOr<double> tc = EvaluateTerms(tensor.terms, values);
  if (!tc.ok()) return tc.status();
  f.fp32 = *fp32;
  f.half = *half;
  f.fp64 = *fp64;
  f.tensor = *tc;
  f.total = f.fp32 + f.half + f.fp64 + f.tensor;
  return f;
}

double CalibrationError(double measured, double m, double n, double k) {
  const double expected = 2.0 * m * n * k;
  return std::fabs(measured - expected) / expected;
}

}  // namespace headlab::measure
