// Head maps (docs/DESIGN.md data model: run, layer, head, role, score, window) arrive as JSON
// artifacts written by the methods (e.g. kinds "aah_head_maps", "aoh_head_maps",
// "saf_head_map"). When such a file is readable where the coordinator runs and its SHA-256
// matches the ARTIFACT message, its rows are copied into the head_maps table so that SQL
// can join roles and windows with results.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab::coord {

struct HeadMapRow {
  int64_t layer = 0;
  int64_t head = 0;
  std::string role;
  std::optional<double> score;
  std::optional<int64_t> window;
};

// Returns true iff an artifact of `kind` holds head-map rows (kind ends in "head_map" or
// "head_maps").
bool IsHeadMapKind(const std::string& kind);

// Parses rows from `text`: a JSON array of {layer, head, role, score?, window?} or an
// object holding such an array under "head_map" or "head_maps".
StatusOr<std::vector<HeadMapRow>> ParseHeadMapRows(const std::string& text);

// Reads `path` (at most 16 MiB), checks its SHA-256 against `sha256` and parses its rows.
StatusOr<std::vector<HeadMapRow>> LoadHeadMapArtifact(const std::string& path,
                                                      const std::string& sha256);

}  // namespace headlab::coord
