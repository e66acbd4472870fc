// Token loading and creation.
#include "coordinator/token.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include "common/files.h"

namespace headlab::coord {

StatusOr<std::string> LoadOrCreateToken(const std::string& data_dir,
                                        const std::string& token_file) {
  auto found = LookUpToken(token_file, std::getenv("HEADLAB_TOKEN"), data_dir);
  if (found.ok()) return found->token;
  if (found.status().code() != Status::Code::kNotFound) return found.status();
  auto t = RandomHex(32);
  if (!t.ok()) return t.status();
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(data_dir + "/token", *t + "\n", 0600));
  return t;
}

StatusOr<std::string> LoadOrCreateWorkerToken(const std::string& data_dir) {
  const std::string path = data_dir + "/" + kWorkerTokenFile;
  if (PathExists(path)) return ReadTokenFile(path);
  auto t = RandomHex(32);
  if (!t.ok()) return t.status();
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, *t + "\n", 0600));
  return t;
}

StatusOr<std::string> RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::IoError("getrandom: cannot read random bytes");
    got += size_t(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string t;
  t.reserve(2 * bytes);
  for (unsigned char b : buf) {
    t += kHex[b >> 4];
    t += kHex[b & 15];
  }
  return t;
}

bool TokenEquals(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace headlab::coord
