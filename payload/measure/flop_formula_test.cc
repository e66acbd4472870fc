#include "payload/measure/flop_formula.h"

#include <set>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::measure {
namespace {

std::map<std::string, double> AllZero(const TensorMetricSet& t) {
  std::map<std::string, double> v;
  for (const std::string& m : FlopMetricNames(t)) v[m] = 0;
  return v;
}

TEST_CASE("fp32 FLOPs are fadd + fmul + 2 ffma") {
  const TensorMetricSet& t = TensorMetricCandidates()[0];
  auto v = AllZero(t);
  v["sm__sass_thread_inst_executed_op_fadd_pred_on.sum"] = 10;
  v["sm__sass_thread_inst_executed_op_fmul_pred_on.sum"] = 20;
  v["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"] = 30;
  StatusOr<FlopCounts> f = AssembleFlops(v, t);
  REQUIRE(f.ok());
  CHECK(f->fp32 == 90);
  CHECK(f->half == 0);
  CHECK(f->total == 90);
}

TEST_CASE("half, fp64 and tensor terms add into the total") {
  const TensorMetricSet& t = TensorMetricCandidates()[0];
  auto v = AllZero(t);
  v["sm__sass_thread_inst_executed_op_hadd_pred_on.sum"] = 1;
  v["sm__sass_thread_inst_executed_op_hmul_pred_on.sum"] = 2;
  v["sm__sass_thread_inst_executed_op_hfma_pred_on.sum"] = 3;  // 1 + 2 + 6 = 9
  v["sm__sass_thread_inst_executed_op_dfma_pred_on.sum"] = 5;  // 10
  v["sm__ops_path_tensor_src_bf16_dst_fp32.sum"] = 1000;
  v["sm__ops_path_tensor_src_tf32_dst_fp32.sum"] = 24;
  StatusOr<FlopCounts> f = AssembleFlops(v, t);
  REQUIRE(f.ok());
  CHECK(f->half == 9);
  CHECK(f->fp64 == 10);
  CHECK(f->tensor == 1024);
  CHECK(f->total == 9 + 10 + 1024);
}

TEST_CASE("a missing counter is named, not read as zero") {
  const TensorMetricSet& t = TensorMetricCandidates()[0];
  auto v = AllZero(t);
  v.erase("sm__sass_thread_inst_executed_op_ffma_pred_on.sum");
  StatusOr<FlopCounts> f = AssembleFlops(v, t);
  REQUIRE_FALSE(f.ok());
  CHECK(f.status().message().find("ffma") != std::string::npos);
}

TEST_CASE("metric names are unique and include every term") {
  for (const TensorMetricSet& t : TensorMetricCandidates()) {
    std::vector<std::string> names = FlopMetricNames(t);
    std::set<std::string> unique(names.begin(), names.end());
    CHECK(unique.size() == names.size());
    for (const MetricTerm& term : t.terms) CHECK(unique.count(term.metric) == 1);
    CHECK(unique.count("sm__sass_thread_inst_executed_op_fmul_pred_on.sum") == 1);
  }
}

TEST_CASE("the x2 candidate doubles the same counters") {
  StatusOr<TensorMetricSet> a = FindTensorMetricSet("ops_path_src");
  StatusOr<TensorMetricSet> b = FindTensorMetricSet("ops_path_src_x2");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::map<std::string, double> v = {{"sm__ops_path_tensor_src_bf16_dst_fp32.sum", 7},
                                     {"sm__ops_path_tensor_src_fp16.sum", 0},
                                     {"sm__ops_path_tensor_src_tf32_dst_fp32.sum", 0},
                                     {"sm__ops_path_tensor_src_fp8.sum", 0}};
  CHECK(*EvaluateTerms(b->terms, v) == 2 * *EvaluateTerms(a->terms, v));
  CHECK_FALSE(FindTensorMetricSet("nope").ok());
}

TEST_CASE("calibration error is relative to 2MNK") {
  CHECK(CalibrationError(2.0 * 64 * 64 * 64, 64, 64, 64) == 0);
  CHECK(CalibrationError(1.01 * 2 * 8 * 8 * 8, 8, 8, 8) == Approx(0.01));
  CHECK(CalibrationError(0.5 * 2 * 8 * 8 * 8, 8, 8, 8) == Approx(0.5));
}

}  // namespace
}  // namespace headlab::measure
