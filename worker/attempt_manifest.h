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

// Returns the first of ASSIGN's `resume` and `resume_fallbacks` (older checkpoints of the
// run, newest first) that VerifiedResume passes, or null: a truncated latest checkpoint
// falls back to the previous good one instead of starting over. The worker reports the
// choice in ACCEPT.resume, which is what the coordinator records.
Json ChooseResume(const Json& assign);

// Returns `work_dir` as an absolute, lexically normal path (READY.work_dir).
std::string AbsoluteWorkDir(const std::string& work_dir);

// Returns <work_dir>/runs/<run>-<attempt> as an absolute path (characters of a string run
// id outside [A-Za-z0-9._-] become '_'). Artifacts outside it are refused by the
// coordinator.
std::string AttemptOutDir(const std::string& work_dir, const Json& run, int64_t attempt);

// Creates the out dir of a validated ASSIGN body and writes manifest.json into it (resume
// chosen by ChooseResume). Returns the manifest's path; `*manifest` (if given) receives
// its content.
StatusOr<std::string> WriteManifest(const std::string& work_dir, const Json& assign,
                                    Json* manifest = nullptr);

}  // namespace headlab
