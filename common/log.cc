// Line-at-a-time stderr logging.
#include "common/log.h"

#include <unistd.h>

#include <ctime>
#include <mutex>

namespace headlab {
namespace {

std::mutex g_role_mu;
std::string g_role = "headlab";

void Write(const char* level, const std::string& msg) {
  char ts[32];
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string role;
  {
    std::lock_guard<std::mutex> l(g_role_mu);
    role = g_role;
  }
  std::string line = std::string(ts) + " " + role + " " + level + ": " + msg + "\n";
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

}  // namespace

void SetLogRole(const std::string& role) {
  std::lock_guard<std::mutex> l(g_role_mu);
  g_role = role;
}
void LogInfo(const std::string& msg) { Write("info", msg); }
void LogWarn(const std::string& msg) { Write("warn", msg); }
void LogError(const std::string& msg) { Write("error", msg); }

}  // namespace headlab
