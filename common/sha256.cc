// SHA-256 through OpenSSL's EVP interface (the SHA256_* functions are deprecated in 3.0).
#include "common/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

namespace headlab {
namespace {

// The implementation, fetched once (an implicit fetch per EVP_DigestInit_ex costs a
// lookup in the provider's table every time).
const EVP_MD* Sha256Md() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

// A failure here is OpenSSL without SHA-256 or out of memory: nothing to go on with.
[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "headlab: OpenSSL SHA-256: %s failed\n", what);
  std::abort();
}

std::string Hex(const unsigned char* d, unsigned n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned i = 0; i < n; ++i) {
    out.push_back(kHex[d[i] >> 4]);
    out.push_back(kHex[d[i] & 0xf]);
  }
  return out;
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || !Sha256Md() || EVP_DigestInit_ex(ctx_, Sha256Md(), nullptr) != 1)
    Die("EVP_DigestInit_ex");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

Sha256::Sha256(Sha256&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& o) noexcept {
  std::swap(ctx_, o.ctx_);
  return *this;
}

void Sha256::Update(const void* data, size_t n) {
  if (n && EVP_DigestUpdate(ctx_, data, n) != 1) Die("EVP_DigestUpdate");
}

std::string Sha256::HexDigest() {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (EVP_DigestFinal_ex(ctx_, d, &n) != 1) Die("EVP_DigestFinal_ex");
  return Hex(d, n);
}

std::string Sha256Hex(const std::string& s) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (!Sha256Md() || EVP_Digest(s.data(), s.size(), d, &n, Sha256Md(), nullptr) != 1)
    Die("EVP_Digest");
  return Hex(d, n);
}

StatusOr<std::string> Sha256File(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::IoError("cannot open " + path + " for hashing");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.Update(buf.data(), n);
  bool err = std::ferror(f);
  std::fclose(f);
  if (err) return Status::IoError("read error while hashing " + path);
  return h.HexDigest();
}

}  // namespace headlab
