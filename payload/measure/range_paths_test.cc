#include "payload/measure/range_paths.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::measure {
namespace {

TEST_CASE("range paths: attention, projections and the core of a step") {
  CHECK(IsAttentionPath("step/forward/attention", "step"));
  CHECK(IsAttentionPath("step/backward/attention", "step"));
  CHECK_FALSE(IsAttentionPath("step/forward/attention/L3", "step"));  // the per-layer child
  CHECK_FALSE(IsAttentionPath("step/forward/attention/proj", "step"));
  CHECK_FALSE(IsAttentionPath("forward/attention", "step"));
  CHECK_FALSE(IsAttentionPath("step/method/forward/attention", "step"));  // a hook's own work
  CHECK(IsProjectionPath("step/forward/attention/proj", "step"));
  CHECK(IsProjectionPath("step/backward/attention/L12/proj", "step"));
  CHECK_FALSE(IsProjectionPath("step/forward/proj", "step"));
  CHECK_FALSE(IsProjectionPath("step/forward/attention/Lx/proj", "step"));
  CHECK_FALSE(IsProjectionPath("step/method/attention/proj", "step"));

  // Per-layer ranges on: the whole attention counted once per layer path, the projections
  // once per layer; core = attention - projections.
  const std::map<std::string, double> flops = {{"step", 100},
                                               {"step/forward", 40},
                                               {"step/backward", 55},
                                               {"step/forward/attention", 20},
                                               {"step/forward/attention/L0", 12},
                                               {"step/forward/attention/L1", 8},
                                               {"step/forward/attention/L0/proj", 5},
                                               {"step/forward/attention/L1/proj", 4},
                                               {"step/backward/attention", 30},
                                               {"step/backward/attention/L0/proj", 9},
                                               {"step/method", 5},
                                               {"step/method/forward/attention", 3},
                                               {"step/method/forward/attention/proj", 1},
                                               {"forward/attention", 20},
                                               {"forward/attention/proj", 9}};
  const AttentionSplit s = SplitAttention(flops, "step");
  CHECK(s.attention == 50);
  CHECK(s.projection == 18);
  CHECK(s.core() == 32);
  const AttentionSplit f = SplitAttention(flops, "forward");
  CHECK(f.attention == 20);
  CHECK(f.core() == 11);
}

}  // namespace
}  // namespace headlab::measure
