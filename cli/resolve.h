// What the CLI's EXP and TARGET arguments name: an experiment by id or by name, and the
// explicit "run ID" / "experiment EXP" pairs of commands that act on either (cancel, tag,
// note), so that a bare number is never silently taken for one or the other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/cli_context.h"
#include "common/json.h"
#include "common/status.h"

namespace headlab {

// Returns the experiment `text` names: an id ("12") or a grid name ("demo": the newest
// experiment of that name; a note on stderr says so when several have it). NotFound for
// an unknown name, with the closest existing name when one is likely meant.
StatusOr<int64_t> ResolveExperiment(const CliContext& ctx, const std::string& text);

// Returns the experiment of `text` in `experiments` (GET /api/v1/experiments): as
// ResolveExperiment without the network; `*note` receives the "newest of N" remark.
StatusOr<int64_t> FindExperiment(const Json& experiments, const std::string& text,
                                 std::string* note);

struct Target {
  enum class Kind { kRun, kExperiment };
  Kind kind = Kind::kRun;
  int64_t id = 0;
  std::string Noun() const { return kind == Kind::kRun ? "run" : "experiment"; }
  // "/api/v1/runs/7" or "/api/v1/experiments/3".
  std::string ApiPath() const;
};

// Parses the target at the front of `args`: "run ID", "experiment EXP", or a bare word,
// which names an experiment (runs have no names). A bare number is refused as ambiguous
// (InvalidArgument saying both spellings). `*used` receives how many arguments it took.
StatusOr<Target> ParseTarget(const CliContext& ctx, const std::vector<std::string>& args,
                             size_t* used);

}  // namespace headlab
