// The run-config schema (schema/grid.md, "Run config"): every key with its type, range and
// default, defined here and nowhere else.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

// Returns the complete default run config.
Json DefaultRunConfig();

// Returns defaults <- preset <- `config`, validated. Errors are InvalidArgument with the
// message "<file>: <path_prefix>.<key>: expected ..., got ..." (unknown keys, wrong types,
// out-of-range values).
StatusOr<Json> NormalizeRunConfig(const Json& config, const std::string& file,
                                  const std::string& path_prefix = "$");

}  // namespace headlab
