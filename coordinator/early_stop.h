// Early stopping of a random search (common/search.h, schema/grid.md "Search"): after new
// points of a running run, the median stopping rule on its grid's `search.early_stop`
// decides whether it stops. A pair stops together: the run's counterparts in the other
// arms (the runs at the same position of their arm's expansion: the same sample, axis
// values and pair_by values) are cancelled with it, so that no comparison is left with
// half a pair. Stopped runs are cancelled runs whose error says why.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/search.h"
#include "coordinator/db.h"
#include "coordinator/store.h"

namespace headlab::coord {

class EarlyStopper {
 public:
  // Returns the queued or running runs to stop, each with the reason, after `points` of
  // attempt `ref` were stored in `db`; empty when its experiment has no early_stop rule,
  // the points hold none of the rule's metric, or the rule says go on.
  std::vector<std::pair<int64_t, std::string>> Check(Db* db, const AttemptRef& ref,
                                                     const std::vector<MetricPoint>& points);

 private:
  // The experiment's rule, read once from its grid.
  const std::optional<EarlyStop>& RuleOf(Db* db, int64_t experiment);

  std::map<int64_t, std::optional<EarlyStop>> rules_;
};

}  // namespace headlab::coord
