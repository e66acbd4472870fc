// On a machine without a GPU (CI, the CPU workers) every measurement must say so.

#include "payload/measure/flop_counter.h"
#include "payload/measure/gpu_presence.h"
#include "payload/measure/kernel_trace.h"
#include "payload/measure/region_timer.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::measure {
namespace {

TEST_CASE("without a GPU, FLOPs are unmeasured with the reason, never a number") {
  const std::string reason = NoGpuReason();
  if (!reason.empty()) {
    CHECK(reason.rfind("no GPU: ", 0) == 0);
    int calls = 0;
    StatusOr<FlopReport> r = MeasureFlops(
        [&] {
          ++calls;
          return Status::Ok();
        },
        nullptr, TensorMetricCandidates()[0]);
    REQUIRE(r.ok());
    CHECK_FALSE(r->measured());
    CHECK(r->unmeasured == reason);
    CHECK(r->ranges.empty());
    CHECK(calls == 0);
    Json j = FlopReportJson(*r);
    CHECK(j["status"] == "unmeasured");
    CHECK(j["reason"] == reason);
    CHECK_FALSE(j.contains("ranges"));

    StatusOr<std::unique_ptr<KernelTrace>> t = KernelTrace::Start();
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().code() == Status::Code::kUnavailable);
    CHECK(t.status().message() == reason);

    RegionTimer timer;
    timer.Push("x");
    timer.Pop();
    CHECK_FALSE(timer.Elapsed().ok());
  } else {
    SUCCEED("a GPU is present: the gpu-label test measure_gpu_test covers this machine");
  }
}

TEST_CASE("a counter session needs metrics") {
  StatusOr<std::unique_ptr<CounterSession>> s = CounterSession::Open(CounterOptions{});
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace headlab::measure
