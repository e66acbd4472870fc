// Test helper: a fresh directory under /tmp, removed with its contents when the object goes
// out of scope. Removal walks the tree with POSIX nftw (payload/exec/test_util.h says why not
// std::filesystem in binaries linked with the pip LibTorch). Shared by the unit tests.
#pragma once

#include <ftw.h>
#include <stdlib.h>

#include <cstdio>
#include <string>

namespace headlab::testing {

class TempDir {
 public:
  // `prefix` names the directory: /tmp/<prefix>-XXXXXX. path() is empty if mkdtemp failed.
  explicit TempDir(const std::string& prefix = "headlab-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (path_.empty()) return;
    nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace headlab::testing
