// Helpers for exec's unit tests: scratch directories without std::filesystem, whose
// remove_all crashed (SIGSEGV) in a test binary linked with the pip LibTorch 2.11 on the
// device machine (its bundled libstdc++ pieces); POSIX nftw works everywhere.
#pragma once

#include <dirent.h>
#include <ftw.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace headlab::testing {

// Returns $TMPDIR (or /tmp) + "/" + name; nothing is created.
inline std::string ScratchPath(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/" + name;
}

// Removes `path` and everything under it, like rm -rf; a missing path is fine.
inline void RemoveTree(const std::string& path) {
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

// Returns true iff `path` is a directory with no entries.
inline bool IsEmptyDir(const std::string& path) {
  DIR* d = opendir(path.c_str());
  if (!d) return false;
  int n = 0;
  while (dirent* e = readdir(d))
    n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
  closedir(d);
  return n == 0;
}

}  // namespace headlab::testing
