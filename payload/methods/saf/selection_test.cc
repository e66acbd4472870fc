#include "payload/methods/saf/selection.h"

#include <map>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

// A fit callback with prescribed KLs (default 0.1); records which heads were fitted.
struct FakeFits {
  std::map<std::pair<int64_t, int64_t>, double> kl;
  std::vector<HeadId> calls;
  FitFn Fn() {
    return [this](const HeadId& h) {
      calls.push_back(h);
      auto it = kl.find({h.layer, h.head});
      double v = it == kl.end() ? 0.1 : it->second;
      return FitOutcome{v, v <= 0.2};
    };
  }
};

TEST_CASE("k = round(r L H)") {
  CHECK(TargetHeadCount(0.25, 12, 12) == 36);
  CHECK(TargetHeadCount(0.75, 12, 12) == 108);
  CHECK(TargetHeadCount(0.1, 2, 4) == 1);  // 0.8 rounds to 1
  CHECK(TargetHeadCount(1.0, 2, 4) == 8);
}

TEST_CASE("selection skips failed fits and takes exactly k heads, fitting no further") {
  FakeFits f;
  f.kl[{0, 1}] = 0.5;  // fails
  std::vector<HeadId> order = HeadsInOrder({1, 0, 3, 2, 5, 4, 7, 6}, 4);
  auto s = SelectInOrder(order, 3, f.Fn());
  REQUIRE(s.ok());
  CHECK(s->heads == std::vector<HeadId>{{0, 0}, {0, 3}, {0, 2}});
  CHECK(s->rejected == std::vector<HeadId>{{0, 1}});
  CHECK(s->rejected_kl[0] == 0.5);
  CHECK(f.calls.size() == 4);  // the candidates after the third acceptance are never fitted
  CHECK(s->fitted == 4);
}

TEST_CASE("selection fails clearly when fewer than k candidates fit") {
  FakeFits f;
  f.kl[{0, 0}] = 0.3;
  f.kl[{0, 1}] = 0.4;
  auto s = SelectInOrder(HeadsInOrder({0, 1, 2}, 4), 2, f.Fn());
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("needs 2 heads but only 1 of 3") != std::string::npos);
}

TEST_CASE("a prescribed set fails on any failed fit, without substitution") {
  FakeFits f;
  f.kl[{1, 2}] = 0.25;
  auto ok = SelectPrescribed({{0, 0}, {1, 1}}, f.Fn());
  REQUIRE(ok.ok());
  CHECK(ok->heads.size() == 2);
  auto bad = SelectPrescribed({{0, 0}, {1, 2}, {1, 3}}, f.Fn());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("1.2") != std::string::npos);
}

TEST_CASE("random selection matches per-layer counts and still applies the fit check") {
  FakeFits f;
  std::vector<HeadId> ranked = {{0, 1}, {0, 2}, {1, 0}};
  std::vector<int64_t> quota = PerLayerCounts(ranked, 3);
  CHECK(quota == std::vector<int64_t>{2, 1, 0});
  std::vector<HeadId> shuffled = ShuffledHeads(3, 4, 99);
  CHECK(shuffled.size() == 12);
  CHECK(shuffled == ShuffledHeads(3, 4, 99));         // deterministic per seed
  f.kl[{shuffled[0].layer, shuffled[0].head}] = 1.0;  // the first candidate fails
  auto s = SelectWithLayerQuota(shuffled, quota, f.Fn());
  REQUIRE(s.ok());
  CHECK(PerLayerCounts(s->heads, 3) == quota);
  std::vector<int64_t> impossible = {5, 0, 0};
  CHECK_FALSE(SelectWithLayerQuota(shuffled, impossible, f.Fn()).ok());
}

TEST_CASE("head overlap and the within-layer spread of scores, by hand") {
  CHECK(HeadOverlap({{0, 1}, {1, 2}, {2, 0}}, {{1, 2}, {0, 0}, {2, 0}}) == 2);
  CHECK(HeadOverlap({}, {{0, 0}}) == 0);
  // 2 layers x 2 heads: layer 0 scores {1, 3} (mean 2, sd 1), layer 1 {5, 5} (sd 0); grand
  // mean 3.5: total SS = 6.25 + 0.25 + 2.25 + 2.25 = 11, within SS = 1 + 1 + 0 + 0 = 2.
  ScoreSpread s = WithinLayerSpread({1, 3, 5, 5}, 2);
  CHECK(s.layer_sd == std::vector<double>{1.0, 0.0});
  CHECK(s.within_share == Approx(2.0 / 11.0));
  // Heads that differ only between layers: share 0; only within layers: share 1.
  CHECK(WithinLayerSpread({1, 1, 4, 4}, 2).within_share == 0.0);
  CHECK(WithinLayerSpread({1, 3, 1, 3}, 2).within_share == Approx(1.0));
  CHECK(WithinLayerSpread({2, 2, 2, 2}, 2).within_share == 0.0);  // no spread at all
}

TEST_CASE("prescribed head lists parse, and bad ones are rejected") {
  auto h = ParseHeadList("0.1,1.3", 2, 4);
  REQUIRE(h.ok());
  CHECK(*h == std::vector<HeadId>{{0, 1}, {1, 3}});
  CHECK(ParseHeadList("", 2, 4)->empty());
  CHECK_FALSE(ParseHeadList("0.4", 2, 4).ok());
  CHECK_FALSE(ParseHeadList("0.1,0.1", 2, 4).ok());
  CHECK_FALSE(ParseHeadList("a.b", 2, 4).ok());
  CHECK_FALSE(ParseHeadList("1", 2, 4).ok());
}

}  // namespace
}  // namespace headlab::saf
