// A child process in its own process group, with stdout and stderr on non-blocking pipes.
// Owned and driven by one thread (the worker's main loop); nothing here blocks.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab {

// How a child ended, from waitpid.
struct ExitInfo {
  int exit_code = 0;  // the exit status, or 128 + signal when killed (as shells report it)
  int signal = 0;     // the killing signal, 0 when it exited
  // Returns "exit N" or "killed by signal N"; "" for exit 0.
  std::string Describe() const;
};

class ChildProcess {
 public:
  // Starts argv[0] (a path, not searched in PATH) with the current environment plus
  // `env_overrides`, stdin from /dev/null, in a new process group; the child gets SIGKILL
  // if the calling thread dies. The error of a failed exec (e.g. a missing binary) is
  // returned here, not discovered later.
  static StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv, const std::map<std::string, std::string>& env_overrides);
  // Kills the group and reaps the child if still running (never leaves a zombie).
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Read ends of the child's stdout / stderr; -1 once closed (EOF seen or drained).
  int stdout_fd() const { return out_fd_; }
  int stderr_fd() const { return err_fd_; }
  // Reads what is available on `fd` (one of the two above) into *out without blocking.
  // Returns false iff the pipe reached EOF or failed; it is then closed.
  bool Read(int fd, std::string* out);
  // Closes both pipe ends (after draining them at exit).
  void ClosePipes();

  // Sends `sig` to the child's whole process group. Returns false iff nothing was left.
  bool SignalGroup(int sig);
  // Reaps the child if it has exited (waitpid WNOHANG). Returns its ExitInfo once, then
  // keeps returning it. Stray processes left in the group are killed at that moment.
  std::optional<ExitInfo> TryReap();

 private:
  ChildProcess() = default;
  void CloseFd(int* fd);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::optional<ExitInfo> exit_;
};

}  // namespace headlab
