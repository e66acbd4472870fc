// The table of methods the payload runs: each method (payload/methods/<m>/) registers one
// MethodSpec from its own folder (<m>_method.cc) at static initialisation, and exec reads
// the table (method_hooks.cc for the training hooks, run_kinds.cc for the run kinds), so
// exec/ names no method. A method's run-config section is registered beside it, torch-free
// (<m>_schema.cc, common/method_schema.h): the coordinator and CLI read that one without
// the payload. A program has the methods whose registration objects it links
// (CMakeLists.txt, headlab_link_methods). Torch-free header.
#pragma once

#include <string>
#include <vector>

#include "payload/exec/method_hooks.h"
#include "payload/exec/run_kinds.h"

namespace headlab {

struct MethodSpec {
  std::string name;  // its run-config section (common/method_schema.h): "aoh"
  // The loop calls the methods' hooks in ascending loop_order; pruning comes first, since
  // it changes which heads exist before any other method looks at them.
  int loop_order = 0;
  HooksFactory make_hooks = nullptr;  // nullptr: the method adds no training hooks
  std::vector<RunKind> run_kinds;     // kinds the method adds to exec's table
};

// Adds `spec` to the table; returns true (for a namespace-scope initialiser). Call only
// from static initialisation.
bool RegisterMethod(MethodSpec spec);

// Returns the registered methods in loop order.
const std::vector<MethodSpec>& Methods();

}  // namespace headlab
