// File helpers on POSIX calls.
#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace headlab {

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(path + ": cannot read (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IoError(path + ": read error");
  return ss.str();
}

Status WriteFileAtomic(const std::string& path, const std::string& data, int mode) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::IoError(tmp + ": cannot create (" + std::strerror(errno) + ")");
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return Status::IoError(tmp + ": write failed (" + std::strerror(errno) + ")");
    }
    off += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return Status::IoError(tmp + ": fsync/close failed");
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::IoError(path + ": rename failed (" + std::strerror(errno) + ")");
  return Status::Ok();
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::IoError(path + ": cannot create directory (" + ec.message() + ")");
  return Status::Ok();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buf, size_t(n));
}

}  // namespace headlab
