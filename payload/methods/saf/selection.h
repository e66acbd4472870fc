// SAF head selection (§3.1, Alg. 1 l.9-24, App. A.2): candidates in score order are fitted
// one by one and kept while their compact fit passes epsilon_fit, until k = round(r L H)
// heads pass; a prescribed head set must pass entirely (no substitution). Fits are lazy
// (a callback), so no head past the k-th accepted one is fitted. Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab::saf {

struct HeadId {
  int64_t layer = 0, head = 0;
  bool operator==(const HeadId& o) const { return layer == o.layer && head == o.head; }
};
inline std::ostream& operator<<(std::ostream& os, const HeadId& h) {
  return os << h.layer << "." << h.head;
}

// The outcome of one candidate's compact fit.
struct FitOutcome {
  double kl = 0;
  bool accepted = false;
};
using FitFn = std::function<FitOutcome(const HeadId&)>;

struct Selection {
  std::vector<HeadId> heads;     // accepted, in the order they were accepted
  std::vector<double> kl;        // their fit KLs
  std::vector<HeadId> rejected;  // fitted and over epsilon_fit
  std::vector<double> rejected_kl;
  int64_t fitted = 0;  // fits run
};

// Returns k = round(r L H) (§3.1).
int64_t TargetHeadCount(double rate, int64_t layers, int64_t heads);

// Walks `order` (candidate heads, best first) and fits each until k pass. Returns the
// selection, or InvalidArgument naming how many of how many candidates fit when fewer than
// k do (the requested rate is attained only if k fits pass, Alg. 1 l.24).
StatusOr<Selection> SelectInOrder(const std::vector<HeadId>& order, int64_t k, const FitFn& fit);

// As SelectInOrder, but at most quota[l] heads of layer l are taken and every quota must be
// filled: random selection matched per layer (§4, App. C.3.1).
StatusOr<Selection> SelectWithLayerQuota(const std::vector<HeadId>& order,
                                         const std::vector<int64_t>& quota, const FitFn& fit);

// Fits exactly `heads`; InvalidArgument naming the first failed head (and its KL) if any
// fit fails: prescribed sets are never substituted (App. A.2).
StatusOr<Selection> SelectPrescribed(const std::vector<HeadId>& heads, const FitFn& fit);

// Returns every head of an L x H model ordered by a per-head order over u = l H + h.
std::vector<HeadId> HeadsInOrder(const std::vector<int64_t>& order, int64_t heads);

// Returns the heads in a random order (seeded), e.g. for random selection.
std::vector<HeadId> ShuffledHeads(int64_t layers, int64_t heads, uint64_t seed);

// Parses a prescribed head list "L.H,L.H,..." for an L x H model; InvalidArgument on a
// malformed, out-of-range or repeated entry.
StatusOr<std::vector<HeadId>> ParseHeadList(const std::string& spec, int64_t layers, int64_t heads);

// Returns the number of selected heads per layer.
std::vector<int64_t> PerLayerCounts(const std::vector<HeadId>& heads, int64_t layers);

// Returns how many heads of `a` are also in `b` (e.g. a control's overlap with the
// variance selection: a control sharing most heads cannot disagree with it).
int64_t HeadOverlap(const std::vector<HeadId>& a, const std::vector<HeadId>& b);

// How much per-head scores ([L H], u = l H + h) vary inside layers: each layer's population
// standard deviation, and the within-layer share of the total sum of squares,
// sum_l sum_h (s_lh - mean_l)^2 / sum_lh (s_lh - mean)^2 in [0, 1] (0 when every score is
// equal). A share near 0 means heads differ only between layers, so a per-layer
// count-matched random control picks heads of the same scores as the selection.
struct ScoreSpread {
  std::vector<double> layer_sd;
  double within_share = 0;
};
ScoreSpread WithinLayerSpread(const std::vector<double>& scores, int64_t heads);

}  // namespace headlab::saf
