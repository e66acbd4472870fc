// `headlab diff RUN RUN`: what differs between two runs' configs (and, beside them, their
// summary metrics), so that "why did these two runs differ?" starts from the keys.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace headlab {

struct KeyDiff {
  std::string key;  // dotted: "train.lr"
  Json a, b;        // null where a run lacks the key
};

// Returns the dotted keys whose values differ between the objects `a` and `b` (nested
// objects flattened; a key only one has counts), in key order.
std::vector<KeyDiff> DiffObjects(const Json& a, const Json& b);

}  // namespace headlab
