// The one JSON layer: nlohmann::json, plus parsing that names the file on error.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace headlab {

using Json = nlohmann::json;

// Parses `text` (JSON with // and /* */ comments allowed). On failure the message names
// `source` (a file name or "request body") and the byte offset.
StatusOr<Json> ParseJson(const std::string& text, const std::string& source);

// Returns the compact, key-sorted serialisation: identical values give identical bytes.
std::string CanonicalJson(const Json& j);

}  // namespace headlab
