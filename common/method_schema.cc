// The table of method sections (method_schema.h).
#include "common/method_schema.h"

#include <algorithm>

namespace headlab {
namespace {

std::vector<MethodSchema>& Table() {
  static std::vector<MethodSchema> table;  // a function-local static: safe at static init
  return table;
}

}  // namespace

bool RegisterMethodSchema(MethodSchema schema) {
  std::vector<MethodSchema>& t = Table();
  auto at =
      std::lower_bound(t.begin(), t.end(), schema.section,
                       [](const MethodSchema& m, const std::string& s) { return m.section < s; });
  t.insert(at, std::move(schema));
  return true;
}

const std::vector<MethodSchema>& MethodSchemas() { return Table(); }

}  // namespace headlab
