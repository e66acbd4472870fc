#include "payload/methods/aah/hierarchy.h"

#include <cmath>
#include <set>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aah {
namespace {

std::vector<Vec> Feats(std::initializer_list<Vec> rows) { return std::vector<Vec>(rows); }

}  // namespace

TEST_CASE("aah cosine_normdiff: cosine minus lambda times relative norm difference") {
  Vec a = {1, 0}, b = {2, 0}, c = {0, 1};
  CHECK(Cosine(a, b) == Approx(1.0f));
  CHECK(Cosine(a, c) == Approx(0.0f));
  CHECK(Cosine(a, Vec{0, 0}) == 0.0f);
  // |1 - 2| / max(1, 2) = 0.5 -> 1 - 16 * 0.5
  CHECK(CosineNormDiff(a, b, 16.0f) == Approx(1.0f - 8.0f));
  CHECK(CosineNormDiff(Vec{0, 0}, Vec{0, 0}, 16.0f) == Approx(0.0f));  // eps guards 0/0
}

TEST_CASE("aah level 0: identical features fall back to a nontrivial bipartition") {
  std::vector<Vec> x(8, Vec{1, 2, 3, 0.5f, 0, 0, 0, 0, 0});
  REQUIRE(CentroidThresholdClustering(x, 0.98f) == std::vector<int>(8, 0));  // collapses
  std::vector<int> p = Level0Partition(x, 0.98f, 16);
  std::set<int> groups(p.begin(), p.end());
  CHECK(groups == std::set<int>{0, 1});
  int ones = 0;
  for (int g : p) ones += g;
  CHECK(ones == 4);                           // ties balance the two sides
  CHECK(Level0Partition(x, 0.98f, 16) == p);  // deterministic
}

TEST_CASE("aah forced bipartition anchors the least similar pair") {
  auto x = Feats({{1, 0}, {1, 0.1f}, {0, 1}, {0.1f, 1}, {1, 0.05f}});
  std::vector<int> p = ForcedBipartition(x);
  CHECK(p[0] != p[2]);  // (0, 2) is the least similar pair: the anchors
  CHECK(p[1] == p[0]);
  CHECK(p[4] == p[0]);
  CHECK(p[3] == p[2]);
}

TEST_CASE("aah centroid threshold clustering separates dissimilar heads and caps groups") {
  auto x = Feats({{1, 0, 0}, {0, 1, 0}, {0.99f, 0.01f, 0}, {0, 0, 1}});
  CHECK(CentroidThresholdClustering(x, 0.9f) == std::vector<int>{0, 1, 0, 2});
  std::vector<int> capped = Level0Partition(x, 0.9f, 2);
  CHECK(std::set<int>(capped.begin(), capped.end()).size() == 2);
  CHECK(capped[0] == capped[2]);
}

TEST_CASE("aah hierarchy shapes [2] and [2,2,2,2]") {
  std::vector<Vec> heads;
  for (int h = 0; h < 16; ++h) heads.push_back({float(h % 4 + 1), float(h / 4 + 1), 1.0f});
  std::vector<int> level0(16);
  for (int h = 0; h < 16; ++h) level0[size_t(h)] = h;  // 16 level-0 items
  Topology base;
  base.head_group = level0;
  auto g0 = AggregateFeatures(base, heads)[0].g;
  Topology deep = BuildUpperLevels(level0, g0, {2, 2, 2, 2}, 16.0f);
  REQUIRE(deep.levels() == 4);
  CHECK(deep.items(1) == 8);
  CHECK(deep.items(2) == 4);
  CHECK(deep.items(3) == 2);
  Topology shallow = BuildUpperLevels({0, 0, 1, 1}, Feats({{1, 0}, {0, 1}}), {2}, 16.0f);
  CHECK(shallow.levels() == 1);

  auto f = AggregateFeatures(deep, heads);
  REQUIRE(f.size() == 4);
  float total = 0;
  for (float s : f[1].size_fraction) total += s;
  CHECK(total == Approx(1.0f));
  // Child-weighted: a level-1 feature is the mean of its two children's features.
  const auto& p = deep.parent[0];
  for (int i = 0; i < deep.items(1); ++i) {
    std::vector<int> kids;
    for (int c = 0; c < 16; ++c)
      if (p[size_t(c)] == i) kids.push_back(c);
    Vec m = MeanOf(f[0].g, kids);
    for (size_t k = 0; k < m.size(); ++k) CHECK(f[1].g[size_t(i)][k] == Approx(m[k]));
  }
}

TEST_CASE("aah upper levels pair by cosine_normdiff, not by cosine alone") {
  // Items 0 and 1 point the same way but differ 4x in norm; 0 and 2 differ in direction
  // a little with equal norms. Cosine alone would pair (0, 1); cosine_normdiff pairs (0, 2).
  auto g = Feats({{1, 0}, {4, 0}, {0.95f, 0.31f}, {3.9f, 0.5f}});
  Topology t = BuildUpperLevels({0, 1, 2, 3}, g, {2, 2}, 16.0f);
  REQUIRE(t.levels() == 2);
  CHECK(t.parent[0][0] == t.parent[0][2]);
  CHECK(t.parent[0][1] == t.parent[0][3]);
}

}  // namespace headlab::aah
