// Test helpers shared by the coordinator's unit tests (not linked into the daemon).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace headlab::coord {

// A fresh directory under /tmp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/headlab-coord-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace headlab::coord
