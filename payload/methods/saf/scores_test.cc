#include "payload/methods/saf/scores.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

TEST_CASE("score names round-trip and unknown names are rejected") {
  for (ScoreKind k : {ScoreKind::kVariance, ScoreKind::kResidualRel, ScoreKind::kRandom}) {
    auto parsed = ParseScoreKind(ScoreKindName(k));
    REQUIRE(parsed.ok());
    CHECK(*parsed == k);
  }
  auto bad = ParseScoreKind("entropy");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("variance") != std::string::npos);
}

TEST_CASE("output-aware scores follow eq. 10-12 from the accumulated sums") {
  OutputStats s;
  s.layers = 1;
  s.heads = 3;
  // c_0 = (1, 0), c_1 = (2, 0) (parallel to c_0), c_2 = (0, 1).
  s.sq_norm = {1, 4, 1};
  s.dims = {2, 2, 2};
  s.gram = {1, 2, 0,  //
            2, 4, 0,  //
            0, 0, 1};
  s.cos_sum = {0.2, 0.4, 0.0};
  s.rel_sum = {1.0, 3.0, 0.5};
  s.rows = 2;
  std::vector<double> mag = MagnitudeScores(s);
  CHECK(mag[1] == Approx(std::sqrt(2.0)));
  std::vector<double> red = RedundancyScores(s);
  CHECK(red[0] == Approx(-1.0));  // parallel to head 1: most redundant
  CHECK(red[1] == Approx(-1.0));
  CHECK(red[2] == Approx(0.0));  // orthogonal to both
  CHECK(ResidualCosScores(s)[1] == Approx(0.2));
  CHECK(ResidualRelScores(s)[0] == Approx(0.5));
}

TEST_CASE("the gradient EMA normalises by the mean over heads and starts from the first update") {
  GradientEma ema;
  ema.Update({1, 3});  // mean 2 -> (0.5, 1.5)
  CHECK(ema.scores()[0] == Approx(0.5));
  ema.Update({2, 2});  // -> 0.9 * 0.5 + 0.1 * 1
  CHECK(ema.scores()[0] == Approx(0.55));
  CHECK(ema.scores()[1] == Approx(0.9 * 1.5 + 0.1));
  CHECK(ema.updates() == 2);
}

TEST_CASE("gate-Taylor scores are normalised within each layer; zero layers score 0") {
  std::vector<double> s = NormalizeGateTaylor({3, 4, 0, 0}, 2);
  CHECK(s[0] == Approx(0.6));
  CHECK(s[1] == Approx(0.8));
  CHECK(s[2] == 0.0);
  CHECK(s[3] == 0.0);
}

TEST_CASE("ranks, rank sums and the gradient veto") {
  std::vector<double> var = {0.3, 0.1, 0.2, 0.4};
  std::vector<double> grad = {0.1, 0.9, 0.2, 0.8};
  CHECK(IncreasingOrder(var) == std::vector<int64_t>{1, 2, 0, 3});
  CHECK(Ranks(var) == std::vector<double>{2, 0, 1, 3});
  CHECK(RankSumScores(var, grad) == std::vector<double>{2, 3, 2, 5});
  // Median grad 0.5: heads 1 and 3 are vetoed and go last, each part in var order.
  CHECK(GradientVetoOrder(var, grad) == std::vector<int64_t>{2, 0, 1, 3});
}

}  // namespace
}  // namespace headlab::saf
