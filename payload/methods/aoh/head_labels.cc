// AoH labels, controls, contiguous reordering and rank statistics (torch-free).
#include "payload/methods/aoh/head_labels.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>

#include "payload/methods/aoh/aoh_schema.h"

namespace headlab::aoh {
namespace {

static_assert(std::size(kMetricNames) == size_t(Metric::kStableRank) + 1);
static_assert(std::size(kAggregationNames) == size_t(GroupAggregation::kMax) + 1);
static_assert(std::size(kSelectionNames) == size_t(Selection::kRandom) + 1);

// Returns the indices [0, n) ordered by `key` ascending, ties by index.
std::vector<int64_t> ArgSort(const std::vector<double>& key) {
  std::vector<int64_t> idx(key.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return key[size_t(a)] < key[size_t(b)]; });
  return idx;
}

// Average ranks (1-based) with ties sharing the mean of their positions.
std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<int64_t> order = ArgSort(v);
  std::vector<double> rank(v.size());
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    while (j + 1 < order.size() && v[size_t(order[j + 1])] == v[size_t(order[i])]) ++j;
    double mean = 0.5 * double(i + j) + 1.0;
    for (size_t k = i; k <= j; ++k) rank[size_t(order[k])] = mean;
    i = j + 1;
  }
  return rank;
}

}  // namespace

const char* MetricName(Metric m) { return kMetricNames[int(m)]; }
StatusOr<Metric> ParseMetric(const std::string& s) {
  return ParseNamed<Metric>(kMetricNames, s, "aoh metric");
}
const char* GroupAggregationName(GroupAggregation a) { return kAggregationNames[int(a)]; }
StatusOr<GroupAggregation> ParseGroupAggregation(const std::string& s) {
  return ParseNamed<GroupAggregation>(kAggregationNames, s, "GQA aggregation");
}
StatusOr<Selection> ParseSelection(const std::string& s) {
  return ParseNamed<Selection>(kSelectionNames, s, "aoh selection");
}

bool LowIsRetrieval(Metric m) { return m == Metric::kEffectiveRank || m == Metric::kStableRank; }

const char* RoleName(Role r) { return r == Role::kRetrieval ? "retrieval" : "streaming"; }

std::vector<std::vector<double>> AggregateGroups(
    const std::vector<std::vector<double>>& head_scores, int64_t kv_heads, GroupAggregation agg) {
  std::vector<std::vector<double>> out;
  for (const auto& layer : head_scores) {
    const int64_t group = int64_t(layer.size()) / kv_heads;
    std::vector<double> g(size_t(kv_heads), 0.0);
    for (int64_t k = 0; k < kv_heads; ++k) {
      auto first = layer.begin() + k * group, last = first + group;
      switch (agg) {
        case GroupAggregation::kMean:
          g[size_t(k)] = std::accumulate(first, last, 0.0) / double(group);
          break;
        case GroupAggregation::kMin:
          g[size_t(k)] = *std::min_element(first, last);
          break;
        case GroupAggregation::kMax:
          g[size_t(k)] = *std::max_element(first, last);
          break;
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

int64_t RetrievalCount(double sparsity, int64_t groups) {
  // AoH §4: k = ceil((1 - s) G).
  double k = std::ceil((1.0 - sparsity) * double(groups) - 1e-9);
  return std::clamp<int64_t>(int64_t(k), 0, groups);
}

std::vector<std::vector<Role>> LabelGroups(const std::vector<std::vector<double>>& group_scores,
                                           Metric metric, Selection selection, double sparsity,
                                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<Role>> roles;
  for (const auto& scores : group_scores) {
    const int64_t G = int64_t(scores.size());
    const int64_t k = RetrievalCount(sparsity, G);
    std::vector<int64_t> order;  // groups in order of preference for retrieval
    if (selection == Selection::kRandom) {
      // Fisher-Yates on raw mt19937_64 output: the same draw on every standard library
      // (std::shuffle's algorithm is implementation-defined).
      order.resize(size_t(G));
      std::iota(order.begin(), order.end(), 0);
      for (int64_t i = G - 1; i > 0; --i)
        std::swap(order[size_t(i)], order[size_t(rng() % uint64_t(i + 1))]);
    } else {
      bool low_first = LowIsRetrieval(metric) == (selection == Selection::kAoh);
      std::vector<double> key = scores;
      if (!low_first)
        for (double& x : key) x = -x;
      order = ArgSort(key);
    }
    std::vector<Role> r(size_t(G), Role::kStreaming);
    for (int64_t i = 0; i < k; ++i) r[size_t(order[size_t(i)])] = Role::kRetrieval;
    roles.push_back(std::move(r));
  }
  return roles;
}

std::vector<std::vector<Role>> HeadRoles(const std::vector<std::vector<Role>>& group_roles,
                                         int64_t heads) {
  std::vector<std::vector<Role>> out;
  for (const auto& layer : group_roles) {
    const int64_t group = heads / int64_t(layer.size());
    std::vector<Role> r(static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) r[size_t(h)] = layer[size_t(h / group)];
    out.push_back(std::move(r));
  }
  return out;
}

HeadOrder ContiguousOrder(const std::vector<Role>& group_roles,
                          const std::vector<double>& group_scores, int64_t heads) {
  const int64_t G = int64_t(group_roles.size()), group = heads / G;
  HeadOrder o;
  for (Role want : {Role::kRetrieval, Role::kStreaming}) {
    for (int64_t g : ArgSort(group_scores))
      if (group_roles[size_t(g)] == want) o.group_perm.push_back(g);
    if (want == Role::kRetrieval) o.retrieval_groups = int64_t(o.group_perm.size());
  }
  for (int64_t g : o.group_perm)
    for (int64_t i = 0; i < group; ++i) o.head_perm.push_back(g * group + i);
  return o;
}

bool IsPermutation(const std::vector<int64_t>& perm) {
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(perm.size()) || seen[size_t(p)]) return false;
    seen[size_t(p)] = true;
  }
  return true;
}

std::vector<int64_t> InversePermutation(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
  return inv;
}

double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  if (n < 2 || b.size() != n) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> ra = Ranks(a), rb = Ranks(b);
  double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / double(n);
  double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / double(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return std::numeric_limits<double>::quiet_NaN();
  return sab / std::sqrt(saa * sbb);
}

std::vector<HeadMapRow> HeadMapRows(const std::vector<std::vector<double>>& head_scores,
                                    const std::vector<std::vector<Role>>& head_roles, int64_t sink,
                                    int64_t recent) {
  std::vector<HeadMapRow> rows;
  for (size_t l = 0; l < head_scores.size(); ++l) {
    for (size_t h = 0; h < head_scores[l].size(); ++h) {
      HeadMapRow r;
      r.layer = int64_t(l);
      r.head = int64_t(h);
      r.role = head_roles[l][h];
      r.score = head_scores[l][h];
      if (r.role == Role::kStreaming) {
        r.sink = sink;
        r.window = recent;
      }
      rows.push_back(r);
    }
  }
  return rows;
}

Json HeadMapsJson(const std::vector<HeadMapRow>& rows) {
  Json out = Json::array();
  for (const HeadMapRow& r : rows)
    out.push_back({{"layer", r.layer},
                   {"head", r.head},
                   {"role", RoleName(r.role)},
                   {"score", r.score},
                   {"sink", r.sink},
                   {"window", r.window}});
  return out;
}

}  // namespace headlab::aoh
