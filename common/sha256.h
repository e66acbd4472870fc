// SHA-256 (FIPS 180-4) of byte strings and files: the one hash of checkpoints, artifacts,
// datasets, binaries, diffs and configs. OpenSSL's libcrypto computes it (Debian's
// libssl-dev), with the CPU's SHA instructions where it has them (x86 SHA-NI, ARMv8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX (openssl/types.h), kept out of this header

namespace headlab {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& o) noexcept;
  Sha256& operator=(Sha256&& o) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t n);
  void Update(const std::string& s) { Update(s.data(), s.size()); }
  // Returns the lowercase hex digest; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  evp_md_ctx_st* ctx_;
};

// Returns the hex SHA-256 of `s`.
std::string Sha256Hex(const std::string& s);
// Returns the hex SHA-256 of the file at `path`, streamed in 1 MiB blocks.
StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace headlab
