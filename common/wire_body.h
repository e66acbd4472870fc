// Bounded parsing of HLW2 message bodies (common/wire.h), on both ends of the connection:
// ParseJsonBounded (common/json.h) checks the size and the depth before the text is parsed,
// so nothing of a body nested deeper than wire::kMaxBodyDepth is built and no later copy,
// dump or comparison of the tree (all recursive in nlohmann::json) can exhaust the stack.
#pragma once

#include <cstddef>
#include <string>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

// Returns the body of `command` as a JSON object, or InvalidArgument (naming the command)
// when it is longer than `max_bytes`, nested deeper than wire::kMaxBodyDepth, not strict
// JSON (invalid UTF-8 included) or not an object.
StatusOr<Json> ParseWireBody(const std::string& command, const std::string& text, size_t max_bytes);

}  // namespace headlab
