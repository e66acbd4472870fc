#include "payload/measure/range_join.h"

#include "payload/measure/range_marker.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::measure {
namespace {

TEST_CASE("kernels join to every range containing their launch") {
  std::vector<HostRange> ranges = {
      {"step", 0, 100}, {"step/forward", 10, 50}, {"step/forward/attention", 20, 30}};
  std::map<uint32_t, uint64_t> launch = {{1, 5}, {2, 25}, {3, 40}, {4, 200}};
  std::vector<KernelRecord> kernels = {{1, 1000, 1010, 7, "a"},
                                       {2, 1010, 1030, 7, "b"},
                                       {3, 1030, 1035, 7, "c"},
                                       {4, 1100, 1101, 7, "d"},
                                       {9, 1200, 1201, 7, "orphan"}};
  JoinResult j = JoinKernelsToRanges(ranges, launch, kernels);
  CHECK(j.ranges["step"].kernels == 3);
  CHECK(j.ranges["step"].kernel_ns == 35);
  CHECK(j.ranges["step/forward"].kernels == 2);
  CHECK(j.ranges["step/forward"].first_start_ns == 1010);
  CHECK(j.ranges["step/forward"].last_end_ns == 1035);
  CHECK(j.ranges["step/forward/attention"].kernels == 1);
  CHECK(j.ranges["step/forward/attention"].kernel_ns == 20);
  CHECK(j.unattributed_kernels == 1);
  CHECK(j.unmatched_kernels == 1);
}

TEST_CASE("repeated ranges count occurrences and kernels once per path") {
  std::vector<HostRange> ranges = {{"f/attention", 0, 10}, {"f/attention", 20, 30}, {"f", 0, 40}};
  std::map<uint32_t, uint64_t> launch = {{1, 5}, {2, 25}};
  std::vector<KernelRecord> kernels = {{1, 0, 10, 1, "x"}, {2, 5, 15, 2, "y"}};
  JoinResult j = JoinKernelsToRanges(ranges, launch, kernels);
  CHECK(j.ranges["f/attention"].occurrences == 2);
  CHECK(j.ranges["f/attention"].kernels == 2);
  CHECK(j.ranges["f/attention"].kernel_ns == 20);
  // Concurrent kernels on two streams overlap in [5, 10): busy time counts it once.
  CHECK(j.ranges["f/attention"].busy_ns == 15);
  CHECK(j.ranges["f"].occurrences == 1);
}

TEST_CASE("union length merges overlaps and skips empty intervals") {
  CHECK(UnionLength({}) == 0);
  CHECK(UnionLength({{0, 10}, {10, 20}}) == 20);
  CHECK(UnionLength({{0, 10}, {2, 3}, {15, 16}, {5, 5}}) == 11);
}

TEST_CASE("range paths join the stack with slashes") {
  CHECK(RangePath({}) == "");
  CHECK(RangePath({"step", "forward", "attention"}) == "step/forward/attention");
}

// A marker that records its calls, for the tee and the scoped range.
struct Recorder : RangeMarker {
  std::vector<std::string> log;
  void Push(const std::string& n) override { log.push_back("+" + n); }
  void Pop() override { log.push_back("-"); }
};

TEST_CASE("scoped ranges reach the active marker only while installed") {
  Recorder a, b;
  { ScopedRange none("ignored"); }
  TeeMarker tee({&a, &b});
  SetActiveMarker(&tee);
  {
    ScopedRange s("step");
    ScopedRange f("forward");
  }
  SetActiveMarker(nullptr);
  { ScopedRange after("ignored"); }
  CHECK(a.log == std::vector<std::string>{"+step", "+forward", "-", "-"});
  CHECK(b.log == a.log);
}

}  // namespace
}  // namespace headlab::measure
