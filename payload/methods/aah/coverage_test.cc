#include "payload/methods/aah/coverage.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aah {

TEST_CASE("aah ACR of a known assignment is mean(W_h) / T") {
  WindowMap w = {{512, 1024, 2048, 4096}, {512, 512, 4096, 4096}};
  const double mean = (512 + 1024 + 2048 + 4096 + 512 + 512 + 4096 + 4096) / 8.0;
  CHECK(AttentionCoverageRatio(w, 4096) == Approx(mean / 4096));
  CHECK(AttentionCoverageRatio({{4096, 4096}}, 4096) == 1.0);
  CHECK(AttentionCoverageRatio({{8192}}, 4096) == 1.0);  // W > T counts as T
}

TEST_CASE("aah exact causal-pair coverage of a known assignment") {
  // T = 8, W = 2: sum_t min(t, 2) = 1 + 2 * 7 = 15; full causal = 36.
  CHECK(CausalPairs(2, 8) == 15);
  CHECK(CausalPairs(8, 8) == 36);
  CHECK(CausalPairs(100, 8) == 36);
  CHECK(ExactCausalCoverage({{2, 8}}, 8) == Approx((15.0 + 36.0) / 72.0));
  // The rectangular proxy and the exact count differ: ACR is not the causal-pair ratio.
  CHECK(AttentionCoverageRatio({{2, 8}}, 8) == Approx(10.0 / 16.0));
}

TEST_CASE("aah inference ACR from branch usage and the window-bucket distribution") {
  BranchUsage u;
  u.Record({{512, 4096}});
  u.Record({{512, 512}});
  auto f = u.Frequencies();
  CHECK(f[512] == Approx(0.75));
  CHECK(f[4096] == Approx(0.25));
  CHECK(InferenceAcr(f, 4096) == Approx(0.75 * 512 / 4096 + 0.25));
  auto b = WindowBucketDistribution({{512, 4096}, {512, 1024}}, {512, 1024, 2048, 4096});
  CHECK(b == std::vector<double>{0.5, 0.25, 0, 0.25});
  Json rows = HeadMapsJson({{512, 4096}}, {{0, 3}}, 4096);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["role"] == "local");
  CHECK(rows[1]["role"] == "ordinary");
  CHECK(rows[1]["window"] == 4096);
  CHECK(rows[1]["score"] == 3);
}

}  // namespace headlab::aah
