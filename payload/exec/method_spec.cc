// The method table (method_spec.h).
#include "payload/exec/method_spec.h"

#include <algorithm>

namespace headlab {
namespace {

std::vector<MethodSpec>& Table() {
  static std::vector<MethodSpec> table;  // a function-local static: safe at static init
  return table;
}

}  // namespace

bool RegisterMethod(MethodSpec spec) {
  std::vector<MethodSpec>& t = Table();
  auto at = std::upper_bound(t.begin(), t.end(), spec.loop_order,
                             [](int order, const MethodSpec& m) { return order < m.loop_order; });
  t.insert(at, std::move(spec));
  return true;
}

const std::vector<MethodSpec>& Methods() { return Table(); }

}  // namespace headlab
