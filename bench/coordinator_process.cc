// Spawning the coordinator (common/child_process.h): its output goes straight to a log file (no
// pipe to drain), and the bench keeps only the pid.
#include "bench/coordinator_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/http_client.h"
#include "common/child_process.h"
#include "common/files.h"
#include "common/json.h"

namespace headlab::bench {
namespace {

// Returns 32 random bytes as hex (the shared worker/HTTP token).
StatusOr<std::string> RandomToken() {
  auto raw = std::string(32, '\0');
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::read(fd, raw.data(), raw.size()) != ssize_t(raw.size())) {
    if (fd >= 0) ::close(fd);
    return Status::IoError("cannot read /dev/urandom");
  }
  ::close(fd);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

// Returns the exit code of a reaped child: its status, or 128 + signal.
int ExitCode(int wstatus) {
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

}  // namespace

StatusOr<int> FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return Status::IoError(std::string("bind 127.0.0.1:0: ") + std::strerror(errno));
  }
  ::close(fd);
  return int(ntohs(addr.sin_port));
}

StatusOr<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Start(const std::string& binary,
                                                                        const std::string& data_dir,
                                                                        double timeout_s) {
  std::unique_ptr<CoordinatorProcess> c(new CoordinatorProcess);
  c->data_dir_ = data_dir;
  HEADLAB_RETURN_IF_ERROR(MakeDirs(data_dir));
  auto token = RandomToken();
  if (!token.ok()) return token.status();
  c->token_ = token.value();
  std::string token_file = data_dir + "/token";
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(token_file, c->token_, 0600));
  // The workers' own token: the coordinator reads DATA_DIR/worker_token when it exists.
  auto worker_token = RandomToken();
  if (!worker_token.ok()) return worker_token.status();
  c->worker_token_ = worker_token.value();
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(data_dir + "/worker_token", c->worker_token_, 0600));
  auto hp = FreeLoopbackPort();
  auto wp = FreeLoopbackPort();
  if (!hp.ok()) return hp.status();
  if (!wp.ok()) return wp.status();
  c->http_port_ = hp.value();
  c->worker_port_ = wp.value();

  std::vector<std::string> args = {binary,         "coordinator",
                                   "--data-dir",   data_dir,
                                   "--http",       "127.0.0.1:" + std::to_string(c->http_port_),
                                   "--workers",    c->worker_endpoint(),
                                   "--token-file", token_file};
  std::string log = c->log_path();
  SpawnOptions opt;
  opt.own_group = false;
  opt.die_with_parent = false;
  opt.stdout_to = opt.stderr_to = SpawnOptions::Output::kFile;
  opt.output_file = log;
  auto child = ChildProcess::Spawn(args, {}, opt);
  if (!child.ok()) return child.status();
  c->pid_ = (*child)->Release();

  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  HttpClient http(c->url(), "", std::chrono::seconds(2));
  while (std::chrono::steady_clock::now() < deadline) {
    int wstatus = 0;
    if (::waitpid(c->pid_, &wstatus, WNOHANG) == c->pid_) {
      c->pid_ = -1;
      return Status::Unavailable("coordinator exited with " + std::to_string(ExitCode(wstatus)) +
                                 " during start-up (see " + log + ")");
    }
    auto j = http.Call("GET", "/api/v1/health");
    if (j.ok() && j->value("ok", false)) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Unavailable("coordinator did not answer /api/v1/health within " +
                             std::to_string(int(timeout_s)) + " s (see " + log + ")");
}

StatusOr<int> CoordinatorProcess::Stop(double timeout_s) {
  if (pid_ < 0) return Status::NotFound("coordinator is not running");
  ::kill(pid_, SIGTERM);
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  int wstatus = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return ExitCode(wstatus);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &wstatus, 0);
  pid_ = -1;
  return Status::Unavailable("coordinator ignored SIGTERM for " + std::to_string(int(timeout_s)) +
                             " s; killed");
}

double CoordinatorProcess::CpuSeconds() const {
  if (pid_ < 0) return -1;
  auto stat = ReadFile("/proc/" + std::to_string(pid_) + "/stat");
  if (!stat.ok()) return -1;
  // Fields after the parenthesised command name (which may contain spaces): state is
  // field 3; utime and stime are fields 14 and 15, in clock ticks.
  const std::string& s = stat.value();
  size_t p = s.rfind(')');
  if (p == std::string::npos) return -1;
  std::istringstream in(s.substr(p + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i)
    if (i >= 14) ticks += std::atof(field.c_str());
  return ticks / double(::sysconf(_SC_CLK_TCK));
}

CoordinatorProcess::~CoordinatorProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int wstatus;
    ::waitpid(pid_, &wstatus, 0);
  }
}

}  // namespace headlab::bench
