// Benchmark figures: a measured value beside its target, with pass/fail, printed as a
// table or JSON.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace headlab::bench {

struct Figure {
  enum class Cmp { kLess, kLessEq, kGreaterEq };  // how value must relate to target
  std::string name;                               // e.g. "dispatch throughput"
  std::string unit;                               // e.g. "runs/s"
  Cmp cmp = Cmp::kGreaterEq;
  double target = 0;
  bool measured = false;  // false: the phase failed before producing a number
  double value = 0;
  std::string note;  // how it was measured, or why it is missing

  // Returns true iff the figure was measured and meets its target.
  bool Pass() const;
  // Returns value/target for "higher is better" figures, target/value otherwise: > 1 means
  // better than the target. 0 when unmeasured.
  double RatioToTarget() const;
};

// Returns a fixed-width table: figure, value, target, ratio, result.
std::string FormatTable(const std::vector<Figure>& figures);
// Returns [{name, unit, value|null, target, cmp, ratio_to_target, pass, note}].
Json FiguresJson(const std::vector<Figure>& figures);

}  // namespace headlab::bench
