// Token loading and creation.
#include "coordinator/token.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include "common/files.h"

namespace headlab::coord {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::string t = Trim(*text);
  if (t.empty()) return Status::InvalidArgument(path + ": token file is empty");
  return t;
}

StatusOr<std::string> LoadOrCreateToken(const std::string& data_dir,
                                        const std::string& token_file) {
  if (const char* env = std::getenv("HEADLAB_TOKEN")) {
    std::string t = Trim(env);
    if (t.empty()) return Status::InvalidArgument("HEADLAB_TOKEN is set but empty");
    return t;
  }
  if (!token_file.empty()) return ReadTokenFile(token_file);
  std::string path = data_dir + "/token";
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
