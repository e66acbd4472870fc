// AoH head labels from per-head scores (torch-free): the retrieval/streaming split per layer
// (AoH §4 "Group-level Classification"), the Random_avg and Reverse controls (AoH §6.4),
// the GQA group aggregation (AoH Table 5), the contiguous reordering of §5 with its exact
// inverse, the Spearman rank correlation of Table 6 and the head_maps rows.
//
// Score layout: scores[layer][head] for query heads; groups: G = kv_heads per layer, query
// head h belongs to KV group h / (heads / kv_heads) (the hybrid layer's GQA convention).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab::aoh {

// The spectral metric a head is scored by (AoH Table 4).
enum class Metric { kEffectiveRank, kFrobenius, kSpectral, kStableRank };
// How query-head scores become a KV-group score (AoH Table 5).
enum class GroupAggregation { kMean, kMin, kMax };
// Which heads keep global attention: AoH (low effective rank, §4), Reverse (the opposite
// end of the same ordering), Random (uniformly random groups, same counts; Random_avg is its
// average over seeds).
enum class Selection { kAoh, kReverse, kRandom };

// Names as used by the aoh.* config keys: "effective_rank" | "frobenius" | "spectral" |
// "stable_rank"; "mean" | "min" | "max"; "aoh" | "reverse" | "random".
const char* MetricName(Metric m);
StatusOr<Metric> ParseMetric(const std::string& s);
const char* GroupAggregationName(GroupAggregation a);
StatusOr<GroupAggregation> ParseGroupAggregation(const std::string& s);
StatusOr<Selection> ParseSelection(const std::string& s);

// Returns true iff a LOW value of `m` marks a retrieval head. Effective rank and stable rank
// measure spectral dimensionality: low = few dominant matching directions = retrieval
// (AoH §1, §4). Frobenius and spectral norm measure kernel magnitude, and the paper's
// Table 4 baselines select heads "with large kernel magnitude or a single dominant singular
// direction" (§6.4): high = retrieval. The paper does not spell the direction out for
// those two; this is our reading.
bool LowIsRetrieval(Metric m);

enum class Role { kRetrieval, kStreaming };
const char* RoleName(Role r);  // "retrieval" | "streaming"

// Returns per-layer group scores [layer][group] from query-head scores [layer][head] by
// `agg` over the heads/kv_heads consecutive query heads of each group (AoH §4, Table 5).
// Requires heads % kv_heads == 0 in every layer.
std::vector<std::vector<double>> AggregateGroups(
    const std::vector<std::vector<double>>& head_scores, int64_t kv_heads, GroupAggregation agg);

// Returns k = ceil((1 - s) * G), the number of retrieval groups of a layer at sparsity s in
// [0, 1] (AoH §4). A tolerance of 1e-9 absorbs rounding, so (1 - 0.7) * 10 gives 3, not 4.
int64_t RetrievalCount(double sparsity, int64_t groups);

// Labels the groups of each layer: exactly RetrievalCount(sparsity, G) groups per layer are
// retrieval. kAoh keeps the groups at the retrieval end of the metric's ordering
// (LowIsRetrieval), kReverse the other end, kRandom a uniformly random subset drawn from
// `seed` (independently per layer). Ties break by the lower group index. Returns
// group_roles[layer][group].
std::vector<std::vector<Role>> LabelGroups(const std::vector<std::vector<double>>& group_scores,
                                           Metric metric, Selection selection, double sparsity,
                                           uint64_t seed);

// Expands group roles to query-head roles: all query heads of a group inherit its label
// (AoH §4). heads = groups * group_size.
std::vector<std::vector<Role>> HeadRoles(const std::vector<std::vector<Role>>& group_roles,
                                         int64_t heads);

// The contiguous layout of one layer (AoH §5): new position -> old index, for KV groups and
// for query heads. Retrieval groups come first, then streaming ones, each in ascending
// group score (AoH §5 sorts by effective rank ascending); ties by old index. The query
// heads of a group move with it and keep their order inside the group.
struct HeadOrder {
  std::vector<int64_t> group_perm;  // group_perm[new] = old group
  std::vector<int64_t> head_perm;   // head_perm[new] = old query head
  int64_t retrieval_groups = 0;     // groups [0, retrieval_groups) are retrieval
};
HeadOrder ContiguousOrder(const std::vector<Role>& group_roles,
                          const std::vector<double>& group_scores, int64_t heads);
// Returns inv with inv[perm[i]] = i; requires perm to be a permutation of [0, n).
std::vector<int64_t> InversePermutation(const std::vector<int64_t>& perm);
// Returns true iff perm is a permutation of [0, perm.size()).
bool IsPermutation(const std::vector<int64_t>& perm);

// Returns Spearman's rank correlation of two equally long score lists (Pearson correlation
// of their ranks, average ranks for ties; AoH Table 6); NaN for fewer than two values or a
// constant list.
double Spearman(const std::vector<double>& a, const std::vector<double>& b);

// One row of the head_maps table (schema/001_init.sql): role retrieval|streaming, score =
// the head's own effective rank (or the chosen metric), window = recent size for streaming
// heads (sink in `sink`), 0 for retrieval heads.
struct HeadMapRow {
  int64_t layer = 0;
  int64_t head = 0;
  Role role = Role::kRetrieval;
  double score = 0;
  int64_t sink = 0;
  int64_t window = 0;
};
std::vector<HeadMapRow> HeadMapRows(const std::vector<std::vector<double>>& head_scores,
                                    const std::vector<std::vector<Role>>& head_roles, int64_t sink,
                                    int64_t recent);
// {"layer":L,"head":H,"role":"streaming","score":S,"window":W,"sink":K} per row.
Json HeadMapsJson(const std::vector<HeadMapRow>& rows);

}  // namespace headlab::aoh
