// Grid files: parse, validate and expand into runs (schema/grid.md is the spec).
// Used by the coordinator on submit and by `headlab submit --dry-run`: one code path.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

// A comparison the grid asks for (schema/grid.md): treatment vs baseline on `metric`.
struct Comparison {
  std::string name;
  std::string baseline;   // arm name
  std::string treatment;  // arm name
  std::string metric;     // e.g. "eval.ppl"
  std::string stat;       // "delta_pct" | "diff" | "ratio"
};

// One run of an expanded grid.
struct ExpandedRun {
  int index = 0;  // position in the deterministic expansion order
  std::string arm;
  Json config;              // complete (defaults applied) and validated run config
  std::string config_hash;  // SHA-256 of CanonicalJson(config)
  std::string pair_key;     // CanonicalJson of the pair_by values
};

struct Grid {
  std::string file;  // source name used in messages
  std::string name;
  std::string description;
  Json source;  // the grid JSON after --set overrides (stored with the experiment)
  std::vector<std::string> arms;     // lexicographic
  std::vector<std::string> pair_by;  // dotted config keys
  std::vector<Comparison> comparisons;
  int max_attempts = 3;
  std::vector<ExpandedRun> runs;
};

// Returns OK iff `text` and every --set argument in `sets` are valid UTF-8; otherwise
// InvalidArgument naming `file` (or the --set argument) and the byte offset and line of the
// first bad byte. A grid travels to the coordinator inside a JSON string, which cannot
// carry such bytes. ExpandGrid checks this first; the CLI checks it before sending.
Status ValidateGridEncoding(const std::string& text, const std::string& file,
                            const std::vector<std::string>& sets);

// Returns the keys a grid's comparisons (and arm means) are broken down by, never pooled
// across: its axes of two or more values that `pair_by` leaves out (lexicographic), then
// a random search's keys when it draws two or more samples. `source` is the grid after
// --set (Grid::source, experiments.grid_json).
std::vector<std::string> StrataKeys(const Json& source, const std::vector<std::string>& pair_by);

// Parses `text` (JSON with comments), applies `sets` ("key=v1,v2" axis overrides),
// validates every field and expands the runs. On bad input returns InvalidArgument whose
// message names `file`, the JSON path and what was expected; nothing else happens.
StatusOr<Grid> ExpandGrid(const std::string& text, const std::string& file,
                          const std::vector<std::string>& sets);

}  // namespace headlab
