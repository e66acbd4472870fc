// Head selection for the pruning controls (SAF App. C.3.4): a given head set ("same heads
// as another arm") or the gate-Taylor rule of eq. 19. Torch-free: the scores come in as
// numbers (the calibration pass that measures |dL/dxi| is importance.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab {

struct HeadRef {
  int64_t layer = 0;
  int64_t head = 0;
  bool operator==(const HeadRef& o) const { return layer == o.layer && head == o.head; }
};

// Parses prune.heads := "" | LAYER "." HEAD ("," LAYER "." HEAD)* for a layers x heads
// model; returns the heads sorted by (layer, head). Repeats and out-of-range heads are
// InvalidArgument naming `where`.
StatusOr<std::vector<HeadRef>> ParseHeadSet(const std::string& spec, int64_t layers, int64_t heads,
                                            const std::string& where);

// Returns round(rate * total) (half up), the number of heads a pruning rate removes.
int64_t PruneCount(double rate, int64_t total);

// Gate-Taylor selection (SAF eq. 19): importance[l][h] = I_lh, the mean over calibration
// sequences of |dL/dxi_lh| at xi = 1. Scores are normalised within each layer,
// s_lh = I_lh / sqrt(sum_h' I_lh'^2) (0 for an all-zero layer), and the `count` globally
// lowest are returned, ties broken by layer then head, in that order (lowest first).
// Heads in `exclude` (e.g. removed already) are never returned.
std::vector<HeadRef> GateTaylorSelect(const std::vector<std::vector<double>>& importance,
                                      int64_t count, const std::vector<HeadRef>& exclude = {});

}  // namespace headlab
