// The one JSON layer: nlohmann::json, plus parsing that names the file on error and bounds
// what it accepts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace headlab {

using Json = nlohmann::json;

// Nesting of arrays and objects a parsed document may have ("[]" is depth 1). nlohmann's
// parser itself is iterative, but everything that walks a value afterwards (dump, copy,
// comparison, FlattenObject) recurses: a document nested 100,000 deep parses and then
// overflows the stack. Grids, run configs and wire messages nest at most about 6 deep.
constexpr size_t kMaxJsonDepth = 64;
// Size of a JSON text ParseJson accepts. Trusted files (checkpoint state, manifests) are
// far below this; inputs from the network pass tighter limits of their own (HTTP bodies:
// coordinator/http_limits.h; wire messages: their frame limit).
constexpr size_t kMaxJsonBytes = size_t(256) << 20;

struct JsonLimits {
  size_t max_depth = kMaxJsonDepth;
  size_t max_bytes = kMaxJsonBytes;
  bool comments = true;  // allow // and /* */ comments (files); false: strict JSON (wire)
};

// Parses `text` (JSON, with // and /* */ comments when `limits.comments`) if it is at most
// `limits.max_bytes` long and nests at most `limits.max_depth` deep. Every failure
// (syntax, number out of double range, too deep, too large) is InvalidArgument whose
// message names `source` (a file name, "request body", a wire command) and, where there is
// one, the byte offset; the message is always valid UTF-8 (offending bytes as \xNN).
StatusOr<Json> ParseJsonBounded(const std::string& text, const std::string& source,
                                const JsonLimits& limits);

// ParseJsonBounded with the default limits (kMaxJsonDepth, kMaxJsonBytes).
StatusOr<Json> ParseJson(const std::string& text, const std::string& source);

// Returns the byte offset of the first '[' or '{' of `text` that opens a container deeper
// than `max_depth`, skipping strings and comments exactly as the parser does, or
// std::string::npos when there is none. Linear time, constant space.
size_t JsonDepthExceededAt(std::string_view text, size_t max_depth);

// Returns the compact, key-sorted serialisation: identical values give identical bytes.
std::string CanonicalJson(const Json& j);

// Returns the compact serialisation of a value built from stored or network data, where a
// string may hold bytes that are not UTF-8: those become U+FFFD instead of the exception
// dump() throws (an answer must never fail to serialise).
std::string JsonText(const Json& j);

}  // namespace headlab
