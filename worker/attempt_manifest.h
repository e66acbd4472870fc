// The manifest the worker writes for each ASSIGN (schema/exec.md, "Manifest"):
//
//    manifest := {run, attempt, experiment, config: {...}, out_dir: absolute dir,
//                 resume: null | {path, sha256, step},
//                 parent: null | {run, path, sha256, step}}
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

// Returns `resume` if it names a local file whose SHA-256 matches, else null (and logs
// why: a missing or changed checkpoint means starting over, never a wrong continuation).
Json VerifiedResume(const Json& resume);

// Returns <work_dir>/runs/<run>-<attempt> as an absolute path (characters of a string run
// id outside [A-Za-z0-9._-] become '_').
std::string AttemptOutDir(const std::string& work_dir, const Json& run, int64_t attempt);

// Creates the out dir of a validated ASSIGN body and writes manifest.json into it (resume
// verified). Returns the manifest's path; `*manifest` (if given) receives its content.
StatusOr<std::string> WriteManifest(const std::string& work_dir, const Json& assign,
                                    Json* manifest = nullptr);

}  // namespace headlab
