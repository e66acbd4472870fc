// SHA-256 (FIPS 180-4) of byte strings and files: the one hash of checkpoints, artifacts,
// datasets, binaries, diffs and configs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace headlab {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t n);
  void Update(const std::string& s) { Update(s.data(), s.size()); }
  // Returns the lowercase hex digest; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// Returns the hex SHA-256 of `s`.
std::string Sha256Hex(const std::string& s);
// Returns the hex SHA-256 of the file at `path`, streamed in 1 MiB blocks.
StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace headlab
