#include "payload/methods/aoh/head_labels.h"

#include <cmath>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aoh {
namespace {

int64_t Count(const std::vector<Role>& r, Role want) {
  int64_t n = 0;
  for (Role x : r) n += x == want;
  return n;
}

TEST_CASE("aoh labels: k = ceil((1 - s) G) retrieval groups") {
  CHECK(RetrievalCount(0.0, 8) == 8);
  CHECK(RetrievalCount(0.25, 8) == 6);
  CHECK(RetrievalCount(0.5, 8) == 4);
  CHECK(RetrievalCount(0.75, 8) == 2);
  CHECK(RetrievalCount(1.0, 8) == 0);
  CHECK(RetrievalCount(0.5, 7) == 4);   // ceil(3.5)
  CHECK(RetrievalCount(0.7, 10) == 3);  // (1 - 0.7) * 10 = 3.0000000000000004 in doubles
}

TEST_CASE("aoh labels: AoH keeps the lowest effective ranks, Reverse the highest") {
  std::vector<std::vector<double>> scores = {{5, 1, 4, 2}, {1, 2, 3, 4}};
  auto aoh = LabelGroups(scores, Metric::kEffectiveRank, Selection::kAoh, 0.5, 0);
  CHECK(aoh[0] ==
        std::vector<Role>{Role::kStreaming, Role::kRetrieval, Role::kStreaming, Role::kRetrieval});
  CHECK(aoh[1] ==
        std::vector<Role>{Role::kRetrieval, Role::kRetrieval, Role::kStreaming, Role::kStreaming});
  auto rev = LabelGroups(scores, Metric::kEffectiveRank, Selection::kReverse, 0.5, 0);
  CHECK(rev[0] ==
        std::vector<Role>{Role::kRetrieval, Role::kStreaming, Role::kRetrieval, Role::kStreaming});
  // Magnitude metrics keep the largest kernels as retrieval heads.
  auto fro = LabelGroups(scores, Metric::kFrobenius, Selection::kAoh, 0.75, 0);
  CHECK(fro[0] ==
        std::vector<Role>{Role::kRetrieval, Role::kStreaming, Role::kStreaming, Role::kStreaming});
  CHECK(fro[1] ==
        std::vector<Role>{Role::kStreaming, Role::kStreaming, Role::kStreaming, Role::kRetrieval});
}

TEST_CASE("aoh labels: Random keeps the same counts, depends on the seed, repeats per seed") {
  std::vector<std::vector<double>> scores(6, std::vector<double>(8, 1.0));
  auto a = LabelGroups(scores, Metric::kEffectiveRank, Selection::kRandom, 0.5, 7);
  auto b = LabelGroups(scores, Metric::kEffectiveRank, Selection::kRandom, 0.5, 7);
  auto c = LabelGroups(scores, Metric::kEffectiveRank, Selection::kRandom, 0.5, 8);
  CHECK(a == b);
  CHECK(a != c);
  for (const auto& layer : c) CHECK(Count(layer, Role::kRetrieval) == 4);
}

TEST_CASE("aoh labels: GQA aggregation and group labels lift to query heads") {
  std::vector<std::vector<double>> heads = {{1, 5, 2, 2, 9, 0}};  // 3 groups of 2
  CHECK(AggregateGroups(heads, 3, GroupAggregation::kMean)[0] == std::vector<double>{3, 2, 4.5});
  CHECK(AggregateGroups(heads, 3, GroupAggregation::kMin)[0] == std::vector<double>{1, 2, 0});
  CHECK(AggregateGroups(heads, 3, GroupAggregation::kMax)[0] == std::vector<double>{5, 2, 9});
  auto roles = HeadRoles({{Role::kStreaming, Role::kRetrieval, Role::kStreaming}}, 6);
  CHECK(roles[0] == std::vector<Role>{Role::kStreaming, Role::kStreaming, Role::kRetrieval,
                                      Role::kRetrieval, Role::kStreaming, Role::kStreaming});
}

TEST_CASE("aoh labels: contiguous order puts retrieval groups first and inverts exactly") {
  std::vector<Role> roles = {Role::kStreaming, Role::kRetrieval, Role::kStreaming,
                             Role::kRetrieval};
  std::vector<double> scores = {3, 2, 0.5, 1};
  HeadOrder o = ContiguousOrder(roles, scores, 8);
  CHECK(o.group_perm == std::vector<int64_t>{3, 1, 2, 0});
  CHECK(o.retrieval_groups == 2);
  CHECK(o.head_perm == std::vector<int64_t>{6, 7, 2, 3, 4, 5, 0, 1});
  REQUIRE(IsPermutation(o.head_perm));
  std::vector<int64_t> inv = InversePermutation(o.head_perm);
  for (size_t i = 0; i < inv.size(); ++i) CHECK(o.head_perm[size_t(inv[i])] == int64_t(i));
  CHECK_FALSE(IsPermutation({0, 2, 2}));
  CHECK_FALSE(IsPermutation({0, 3, 1}));
}

TEST_CASE("aoh labels: Spearman rank correlation") {
  CHECK(Spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == Approx(1.0));
  CHECK(Spearman({1, 2, 3, 4}, {4, 3, 2, 1}) == Approx(-1.0));
  // Ranks (1,2,3,4) vs (2,1,4,3): 1 - 6 * 4 / (4 * 15) = 0.6.
  CHECK(Spearman({1, 2, 3, 4}, {0.2, 0.1, 0.9, 0.5}) == Approx(0.6));
  // Ties take average ranks: (1.5, 1.5, 3) vs (1, 2, 3) -> r = 0.866.
  CHECK(Spearman({1, 1, 2}, {1, 2, 3}) == Approx(std::sqrt(3.0) / 2));
  CHECK(std::isnan(Spearman({1, 1, 1}, {1, 2, 3})));
  CHECK(std::isnan(Spearman({1}, {1})));
}

TEST_CASE("aoh labels: head_maps rows and names") {
  auto rows = HeadMapRows({{2.5, 7.0}}, {{Role::kRetrieval, Role::kStreaming}}, 128, 256);
  REQUIRE(rows.size() == 2);
  CHECK(rows[1].role == Role::kStreaming);
  CHECK(rows[1].window == 256);
  CHECK(rows[0].window == 0);
  Json j = HeadMapsJson(rows);
  CHECK(j[1]["role"] == "streaming");
  CHECK(j[0]["score"] == 2.5);
  CHECK(ParseMetric("stable_rank").value() == Metric::kStableRank);
  CHECK_FALSE(ParseMetric("trace").ok());
  CHECK(ParseGroupAggregation("min").value() == GroupAggregation::kMin);
  CHECK(ParseSelection("reverse").value() == Selection::kReverse);
  CHECK(std::string(MetricName(Metric::kFrobenius)) == "frobenius");
}

}  // namespace
}  // namespace headlab::aoh
