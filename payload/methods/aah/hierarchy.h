// Head grouping and the group hierarchy of AAH-v3 (AAH §5.4): level-0 cosine
// centroid-threshold clustering with the deterministic forced-bipartition fallback, upper
// levels paired by the cosine_normdiff similarity, child-weighted group features and size
// fractions. Torch-free small-vector math.
#pragma once

#include <cstdint>
#include <vector>

namespace headlab::aah {

using Vec = std::vector<float>;

constexpr float kSimEps = 1e-6f;  // epsilon of cosine_normdiff (§5.4)

// Returns cos(a, b) = a.b / max(|a| |b|, kSimEps) (0 when either vector is zero).
float Cosine(const Vec& a, const Vec& b);
// Returns cosine_normdiff(a, b) = cos(a, b) - lambda |(|a| - |b|)| / max(|a|, |b|, eps)
// (AAH §5.4, upper levels).
float CosineNormDiff(const Vec& a, const Vec& b, float lambda, float eps = kSimEps);

// Level-0 grouping by centroid threshold (AAH §5.4): heads in index order join the group
// whose centroid (mean of its members) is most cosine-similar, when that similarity is at
// least `threshold`, else open a new group. Returns the group of each head, groups numbered
// by first member.
std::vector<int> CentroidThresholdClustering(const std::vector<Vec>& x, float threshold);

// The deterministic forced bipartition (AAH §5.4): the least cosine-similar head pair
// (lowest indices on ties) are the anchors of groups 0 and 1; every other head joins the
// anchor it is more similar to, ties going to the currently smaller group (then group 0).
// Needs >= 2 heads. Not random, not PCA.
std::vector<int> ForcedBipartition(const std::vector<Vec>& x);

// The level-0 partition: CentroidThresholdClustering, then while there are more than
// `max_groups` groups the two with the most cosine-similar centroids merge, and a single
// group falls back to ForcedBipartition (when there are >= 2 heads).
std::vector<int> Level0Partition(const std::vector<Vec>& x, float threshold, int max_groups);

// A group hierarchy over heads: level 0 = head groups, level r + 1 = parents of level r.
struct Topology {
  std::vector<int> head_group;           // head -> level-0 item
  std::vector<std::vector<int>> parent;  // parent[r][i]: level-r item i -> level r+1 item
  int levels() const { return int(parent.size()) + 1; }
  // Returns the number of items at `level`.
  int items(int level) const;
};

// Returns the product of the shape's entries (the most level-0 groups it describes).
int MaxLevel0Groups(const std::vector<int64_t>& shape);

// Builds the upper levels on top of `head_group` (kept) from the level-0 group features
// `g0` (AAH §5.4): the shape is read top-down (shape[0] items at the top, each item at
// level r + 1 has up to shape[R - 1 - r] children); levels are added while the current
// one has more than shape[0] items and fewer than shape.size() levels exist. Each parent
// takes the most cosine_normdiff-similar unassigned item pair, then (for branching > 2)
// the unassigned items most similar to its first child; a leftover item is a parent alone.
// Parents are numbered by their first child; children keep index order (sibling order).
Topology BuildUpperLevels(const std::vector<int>& head_group, const std::vector<Vec>& g0,
                          const std::vector<int64_t>& shape, float lambda);

// The aggregated features of one level: g_i (§5.4), s_i = |C_i| / sum_j |C_j| and the
// child counts.
struct LevelFeatures {
  std::vector<Vec> g;
  std::vector<float> size_fraction;
  std::vector<int> children;
};

// Returns the features of every level of `t` from the (EMA-smoothed) head features:
// level 0 = mean over member heads, level r + 1 = mean over children (child-weighted:
// each child counts once whatever its descendant heads, AAH §5.4).
std::vector<LevelFeatures> AggregateFeatures(const Topology& t, const std::vector<Vec>& heads);

// Returns the mean of the rows of `x` listed by `members` (zeros when empty).
Vec MeanOf(const std::vector<Vec>& x, const std::vector<int>& members);

}  // namespace headlab::aah
