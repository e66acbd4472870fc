// The problems of one input, collected so that all are reported at once (a grid with three
// bad fields names all three) rather than one per attempt.
#pragma once

#include <cstddef>
#include <vector>

#include "common/status.h"

namespace headlab {

class ErrorList {
 public:
  // Records `s` unless it is OK; returns s.ok(). A status from another list's ToStatus
  // ("[FILE: ]N problems:" and a line each) adds each of its problems.
  bool Add(const Status& s);
  bool empty() const { return errors_.empty(); }
  // OK when empty; the one error as it is; else InvalidArgument "N problems:" with every
  // message on a line of its own (the first kMaxShown, then how many more). When every
  // message names the same file ("g.jsonc: ..."), so does the first line
  // ("g.jsonc: 3 problems:"): an error always starts with the input it is about.
  Status ToStatus() const;

  static constexpr size_t kMaxShown = 20;

 private:
  std::vector<Status> errors_;
};

}  // namespace headlab
