// The exec manifest (schema/exec.md): what the worker hands one attempt of one run.
//
// manifest := {run: id, attempt: int >= 0, experiment: id, config: {run config},
//              out_dir: absolute path, resume: null | {path, sha256, step},
//              parent: null | {run, path, sha256, step}}
// id := integer | string
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

// A checkpoint to continue from, as recorded by an artifact event.
struct ResumePoint {
  std::string path;
  std::string sha256;
  int64_t step = 0;
};

struct Manifest {
  Json run;  // run id as the coordinator gave it
  int64_t attempt = 0;
  Json experiment;  // experiment id
  Json config;      // the run config as given (normalized later)
  std::string out_dir;
  std::optional<ResumePoint> resume;  // this run's own checkpoint (a requeued attempt)
  // The shared parent's checkpoint a continuation starts from (run config parent.*); used
  // only when `resume` is absent, i.e. before the run has a checkpoint of its own.
  std::optional<ResumePoint> parent;
  Json parent_run;  // the parent's run id (provenance)
};

// Parses manifest JSON text. Errors are InvalidArgument "<file>: $.<field>: ...".
StatusOr<Manifest> ParseManifest(const std::string& text, const std::string& file);

}  // namespace headlab
