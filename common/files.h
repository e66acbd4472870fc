// Small file-system helpers used by every process: whole-file reads, crash-safe writes.
#pragma once

#include <string>

#include "common/status.h"

namespace headlab {

// Reads the whole file; the error names the path.
StatusOr<std::string> ReadFile(const std::string& path);
// Writes `data` to path.tmp, fsyncs, and renames over `path`: a crash leaves either the
// old or the new content, never a torn file. `mode` applies to a newly created file.
Status WriteFileAtomic(const std::string& path, const std::string& data, int mode = 0644);
// Creates `path` and its parents (like mkdir -p).
Status MakeDirs(const std::string& path);
// Returns true iff `path` exists.
bool PathExists(const std::string& path);
// Returns the running executable's path (/proc/self/exe resolved), or "/proc/self/exe"
// when it cannot be resolved.
std::string SelfExe();

}  // namespace headlab
