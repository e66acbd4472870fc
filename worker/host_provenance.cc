// Host provenance through git and SHA-256. Each fact that cannot be established is
// recorded as "unknown" rather than guessed.
#include "worker/host_provenance.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "common/child_process.h"
#include "common/log.h"
#include "common/sha256.h"

namespace headlab {
namespace {

constexpr const char* kUnknown = "unknown";

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return kUnknown;
  return buf;
}

}  // namespace

std::string FindInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = ::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string cand = dirs.substr(start, end - start) + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

StatusOr<int> RunAndCapture(const std::vector<std::string>& argv,
                            const std::function<void(const std::string&)>& on_stdout,
                            int timeout_ms) {
  std::vector<std::string> resolved = argv;
  resolved[0] = FindInPath(argv[0]);
  if (resolved[0].empty()) return 127;
  StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(resolved, {});
  if (!child.ok()) return 127;
  ChildProcess& c = **child;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (c.stdout_fd() >= 0 || c.stderr_fd() >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return Status::Unavailable(argv[0] + ": timed out");  // dtor kills it
    pollfd fds[2] = {{c.stdout_fd(), POLLIN, 0}, {c.stderr_fd(), POLLIN, 0}};
    if (::poll(fds, 2, int(left)) < 0 && errno != EINTR) break;
    std::string out, err;
    if (fds[0].revents && fds[0].fd >= 0) c.Read(fds[0].fd, &out);
    if (fds[1].revents && fds[1].fd >= 0) c.Read(fds[1].fd, &err);  // discarded
    if (!out.empty()) on_stdout(out);
  }
  for (;;) {
    if (std::optional<ExitInfo> e = c.TryReap()) return e->exit_code;
    if (std::chrono::steady_clock::now() > deadline)
      return Status::Unavailable(argv[0] + ": timed out");
    ::usleep(1000);  // the pipes are closed, so exit is imminent
  }
}

std::string DescribeDevices(const std::vector<Device>& devices) {
  std::string s;
  for (const Device& d : devices) {
    if (!s.empty()) s += ", ";
    s += d.kind == "cuda" ? "cuda:" + std::to_string(d.index) + " " + d.name : "cpu: " + d.name;
  }
  return s;
}

void MarkCpuOnlyAttempt(Json* provenance) {
  (*provenance)["devices"] = DescribeDevices({CpuDevice()});
  (*provenance)["driver_version"] = "none (CPU run)";
  (*provenance)["cuda_version"] = "none (CPU run)";
}

Json ComputeHostProvenance(const std::string& source_dir, const std::string& binary_path,
                           const DeviceInventory& inventory) {
  Json p;
  // `-c safe.directory=*`: a tree owned by another user is still the tree we were built from.
  const std::vector<std::string> git = {"git", "-c", "safe.directory=*", "-C", source_dir};
  auto git_cmd = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = git;
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  std::string head;
  StatusOr<int> rc =
      RunAndCapture(git_cmd({"rev-parse", "HEAD"}), [&](const std::string& s) { head += s; });
  while (!head.empty() && (head.back() == '\n' || head.back() == '\r')) head.pop_back();
  if (rc.ok() && *rc == 0 && head.size() == 40) {
    p["git_commit"] = head;
    std::string status;
    rc = RunAndCapture(git_cmd({"status", "--porcelain"}),
                       [&](const std::string& s) { status += s; });
    p["git_dirty"] = rc.ok() && *rc == 0 ? Json(!status.empty()) : Json(kUnknown);
    Sha256 diff;
    rc = RunAndCapture(git_cmd({"diff", "HEAD"}), [&](const std::string& s) { diff.Update(s); });
    p["git_diff_sha256"] = rc.ok() && *rc == 0 ? diff.HexDigest() : std::string(kUnknown);
  } else {
    LogWarn("provenance: no git commit for " + source_dir +
            " (git unavailable or not a repository)");
    p["git_commit"] = kUnknown;
    p["git_dirty"] = kUnknown;
    p["git_diff_sha256"] = kUnknown;
  }
  StatusOr<std::string> bin = Sha256File(binary_path);
  p["binary_sha256"] = bin.ok() ? *bin : std::string(kUnknown);
  // `headlab exec` runs its payload from libheadlab_exec.so beside the binary (main.cc):
  // hash it too, or binary_sha256 would not cover the code that trained.
  const std::string plugin =
      binary_path.substr(0, binary_path.rfind('/') + 1) + "libheadlab_exec.so";
  StatusOr<std::string> lib = Sha256File(plugin);
  p["exec_plugin_sha256"] = lib.ok() ? *lib : std::string(kUnknown);
  p["host"] = HostName();
  p["devices"] = DescribeDevices(inventory.devices);
  p["driver_version"] = inventory.cuda_driver;
  p["cuda_version"] = inventory.cuda_runtime;
  return p;
}

}  // namespace headlab
