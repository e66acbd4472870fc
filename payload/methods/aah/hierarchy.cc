// AAH §5.4: level-0 clustering with fallback, cosine_normdiff upper levels, aggregation.
#include "payload/methods/aah/hierarchy.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace headlab::aah {
namespace {

float Norm(const Vec& a) {
  double s = 0;
  for (float v : a) s += double(v) * v;
  return float(std::sqrt(s));
}

float Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return float(s);
}

// Renumbers groups by first member, in place.
void Renumber(std::vector<int>* group) {
  std::vector<int> seen_old;
  for (int& g : *group) {
    auto it = std::find(seen_old.begin(), seen_old.end(), g);
    if (it == seen_old.end()) {
      seen_old.push_back(g);
      g = int(seen_old.size()) - 1;
    } else {
      g = int(it - seen_old.begin());
    }
  }
}

std::vector<std::vector<int>> Members(const std::vector<int>& group, int n) {
  std::vector<std::vector<int>> m(static_cast<size_t>(n));
  for (size_t h = 0; h < group.size(); ++h) m[size_t(group[h])].push_back(int(h));
  return m;
}

int CountGroups(const std::vector<int>& group) {
  int n = 0;
  for (int g : group) n = std::max(n, g + 1);
  return n;
}

}  // namespace

float Cosine(const Vec& a, const Vec& b) {
  return Dot(a, b) / std::max(Norm(a) * Norm(b), kSimEps);
}

float CosineNormDiff(const Vec& a, const Vec& b, float lambda, float eps) {
  const float na = Norm(a), nb = Norm(b);
  // AAH §5.4: sim = cos(g_i, g_j) - lambda | |g_i| - |g_j| | / max(|g_i|, |g_j|, eps).
  return Cosine(a, b) - lambda * std::fabs(na - nb) / std::max({na, nb, eps});
}

Vec MeanOf(const std::vector<Vec>& x, const std::vector<int>& members) {
  Vec m(x.empty() ? 0 : x[0].size(), 0.0f);
  for (int k : members)
    for (size_t i = 0; i < m.size(); ++i) m[i] += x[size_t(k)][i];
  for (float& v : m) v /= float(std::max<size_t>(1, members.size()));
  return m;
}

std::vector<int> CentroidThresholdClustering(const std::vector<Vec>& x, float threshold) {
  std::vector<int> group(x.size(), 0);
  std::vector<std::vector<int>> members;
  std::vector<Vec> centroid;
  for (size_t h = 0; h < x.size(); ++h) {
    int best = -1;
    float best_sim = -2;
    for (size_t c = 0; c < centroid.size(); ++c) {
      float s = Cosine(x[h], centroid[c]);
      if (s > best_sim) best_sim = s, best = int(c);
    }
    if (best >= 0 && best_sim >= threshold) {
      members[size_t(best)].push_back(int(h));
      centroid[size_t(best)] = MeanOf(x, members[size_t(best)]);
      group[h] = best;
    } else {
      members.push_back({int(h)});
      centroid.push_back(x[h]);
      group[h] = int(members.size()) - 1;
    }
  }
  return group;
}

std::vector<int> ForcedBipartition(const std::vector<Vec>& x) {
  const int n = int(x.size());
  std::vector<int> group(size_t(n), 0);
  if (n < 2) return group;
  int a = 0, b = 1;
  float least = 2;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      float s = Cosine(x[size_t(i)], x[size_t(j)]);
      if (s < least) least = s, a = i, b = j;
    }
  group[size_t(b)] = 1;
  int size[2] = {1, 1};
  for (int h = 0; h < n; ++h) {
    if (h == a || h == b) continue;
    float sa = Cosine(x[size_t(h)], x[size_t(a)]), sb = Cosine(x[size_t(h)], x[size_t(b)]);
    int g = sa > sb ? 0 : sb > sa ? 1 : (size[1] < size[0] ? 1 : 0);
    group[size_t(h)] = g;
    ++size[g];
  }
  return group;
}

std::vector<int> Level0Partition(const std::vector<Vec>& x, float threshold, int max_groups) {
  std::vector<int> group = CentroidThresholdClustering(x, threshold);
  int n = CountGroups(group);
  while (n > std::max(1, max_groups)) {
    // Merge the pair of groups with the most similar centroids (lowest indices on ties).
    auto members = Members(group, n);
    std::vector<Vec> c;
    for (const auto& m : members) c.push_back(MeanOf(x, m));
    int bi = 0, bj = 1;
    float best = -2;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) {
        float s = Cosine(c[size_t(i)], c[size_t(j)]);
        if (s > best) best = s, bi = i, bj = j;
      }
    for (int& g : group)
      if (g == bj) g = bi;
    Renumber(&group);
    n = CountGroups(group);
  }
  if (n == 1 && x.size() >= 2) return ForcedBipartition(x);  // AAH §5.4 fallback
  return group;
}

int Topology::items(int level) const {
  if (level == 0) return CountGroups(head_group);
  return CountGroups(parent[size_t(level - 1)]);
}

int MaxLevel0Groups(const std::vector<int64_t>& shape) {
  int64_t p = 1;
  for (int64_t b : shape) p = std::min<int64_t>(p * b, 1 << 20);
  return int(p);
}

Topology BuildUpperLevels(const std::vector<int>& head_group, const std::vector<Vec>& g0,
                          const std::vector<int64_t>& shape, float lambda) {
  Topology t;
  t.head_group = head_group;
  const int R = int(shape.size());
  const int top = shape.empty() ? 1 : int(shape[0]);
  std::vector<Vec> g = g0;
  while (!shape.empty() && int(g.size()) > top && t.levels() < R) {
    const int r = t.levels() - 1;  // building level r + 1 from level r
    const int branching = int(shape[size_t(R - 1 - r)]);
    const int n = int(g.size());
    std::vector<std::tuple<float, int, int>> pairs;  // (-sim, i, j): best first
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        pairs.emplace_back(-CosineNormDiff(g[size_t(i)], g[size_t(j)], lambda), i, j);
    std::sort(pairs.begin(), pairs.end());
    std::vector<int> parent(size_t(n), -1);
    std::vector<std::vector<int>> children;
    for (const auto& [neg, i, j] : pairs) {
      if (parent[size_t(i)] >= 0 || parent[size_t(j)] >= 0) continue;
      std::vector<int> kids = {i, j};
      // Branching > 2: add the unassigned items most similar to the first child.
      while (int(kids.size()) < branching) {
        int best = -1;
        float best_sim = -1e30f;
        for (int k = 0; k < n; ++k) {
          if (parent[size_t(k)] >= 0 || std::find(kids.begin(), kids.end(), k) != kids.end())
            continue;
          float s = CosineNormDiff(g[size_t(i)], g[size_t(k)], lambda);
          if (s > best_sim) best_sim = s, best = k;
        }
        if (best < 0) break;
        kids.push_back(best);
      }
      for (int k : kids) parent[size_t(k)] = int(children.size());
      children.push_back(kids);
    }
    for (int i = 0; i < n; ++i)
      if (parent[size_t(i)] < 0) {
        parent[size_t(i)] = int(children.size());
        children.push_back({i});
      }
    Renumber(&parent);  // parents numbered by first child
    std::vector<Vec> next;
    for (const auto& kids : Members(parent, CountGroups(parent)))
      next.push_back(MeanOf(g, kids));  // child-weighted (§5.4)
    t.parent.push_back(parent);
    g = std::move(next);
  }
  return t;
}

std::vector<LevelFeatures> AggregateFeatures(const Topology& t, const std::vector<Vec>& heads) {
  std::vector<LevelFeatures> out(size_t(t.levels()));
  const std::vector<Vec>* below = &heads;
  for (int r = 0; r < t.levels(); ++r) {
    LevelFeatures& f = out[size_t(r)];
    const int n = t.items(r);
    auto members = Members(r == 0 ? t.head_group : t.parent[size_t(r - 1)], n);
    int total = 0;
    for (const auto& m : members) {
      f.g.push_back(MeanOf(*below, m));  // g^(0): mean of heads; g^(r): mean of children
      f.children.push_back(int(m.size()));
      total += int(m.size());
    }
    for (int c : f.children) f.size_fraction.push_back(float(c) / float(std::max(1, total)));
    below = &f.g;
  }
  return out;
}

}  // namespace headlab::aah
