// The one process spawner of headlab (worker attempts, data-parallel ranks, `headlab up`,
// `headlab slurm`'s sbatch, the coordinator benchmark): fork/execve of a child, by default
// in its own process group with stdout and stderr on non-blocking pipes. Owned and driven
// by one thread; nothing here blocks except Wait.
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

// What Spawn may change besides argv and the environment. The defaults are a worker
// attempt's: own process group, dies with the caller, stdout and stderr on pipes.
struct SpawnOptions {
  // Where the child's stdout or stderr goes: a pipe read through stdout_fd()/stderr_fd(),
  // /dev/null, the caller's own, or `output_file` (opened for appending, mode 0644).
  enum class Output { kPipe, kNull, kInherit, kFile };

  std::string cwd;  // the child's working directory ("" = the caller's)
  // true: the child's stdin is a pipe written through stdin_fd(); else /dev/null.
  bool stdin_pipe = false;
  int report_fd = -1;  // >= 0: a third pipe whose write end is this fd in the child
  // false: the child stays in the caller's process group, so a signal to the caller's
  // group reaches both (SignalGroup then signals the child alone).
  bool own_group = true;
  // true: the child leads a new session (setsid), so it outlives the caller's terminal
  // (`headlab up --detach`); it is then also its own group's leader.
  bool new_session = false;
  // true: the child gets SIGKILL when the calling thread dies (PR_SET_PDEATHSIG).
  bool die_with_parent = true;
  // true: an argv[0] without '/' is looked up in PATH (execvpe); else it is a path.
  bool search_path = false;
  Output stdout_to = Output::kPipe;
  Output stderr_to = Output::kPipe;
  std::string output_file;  // for Output::kFile
};

class ChildProcess {
 public:
  // Starts argv[0] (a path, not searched in PATH) with the current environment plus
  // `env_overrides`, stdin from /dev/null (SpawnOptions::stdin_pipe: a pipe), default signal
  // dispositions and an empty signal mask, in a new process group; the child gets SIGKILL if the
  // calling thread dies. The error of a failed exec (e.g. a missing binary) is returned here, not
  // discovered later.
  static StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv,
      const std::map<std::string, std::string>& env_overrides);
  // As above, changed by `options` (in `options.cwd`, with a report pipe when
  // `options.report_fd` >= 0, ...). A cwd that cannot be entered, or an output file that
  // cannot be opened, is a Spawn error.
  static StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv, const std::map<std::string, std::string>& env_overrides,
      const SpawnOptions& options);
  // Kills the group and reaps the child if still running (never leaves a zombie).
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Read ends of the child's stdout / stderr; -1 once closed (EOF seen or drained).
  int stdout_fd() const { return out_fd_; }
  int stderr_fd() const { return err_fd_; }
  // Read end of the report pipe (SpawnOptions::report_fd); -1 without one or once closed.
  int report_fd() const { return report_fd_; }
  // Write end of the child's stdin (SpawnOptions::stdin_pipe), non-blocking; -1 without
  // one or once closed.
  int stdin_fd() const { return in_fd_; }
  // Writes what it can of `data` from `*offset` on without blocking and advances
  // `*offset`; closes stdin (EOF for the child) once all is written. Returns false iff the
  // pipe failed (the child closed it or exited); it is then closed. The caller must ignore
  // SIGPIPE (the coordinator and the worker do).
  bool Write(const std::string& data, size_t* offset);
  // Closes the child's stdin.
  void CloseStdin();
  // Reads what is available on `fd` (one of the three above) into *out without blocking.
  // Returns false iff the pipe reached EOF or failed; it is then closed.
  bool Read(int fd, std::string* out);
  // Closes the pipe ends (after draining them at exit).
  void ClosePipes();

  // Sends `sig` to the child's whole process group (to the child alone without its own
  // group). Returns false iff nothing was left.
  bool SignalGroup(int sig);
  // Reaps the child if it has exited (waitpid WNOHANG). Returns its ExitInfo once, then
  // keeps returning it. Stray processes left in the group are killed at that moment.
  std::optional<ExitInfo> TryReap();
  // Blocks until the child exits, then as TryReap.
  ExitInfo Wait();
  // Closes the pipes and hands the child over to the caller, who then signals and reaps
  // it by pid: the destructor leaves it alone. Returns its pid.
  pid_t Release();

 private:
  ChildProcess() = default;
  void CloseFd(int* fd);
  // Records how the child ended (waitpid status `st`, or r < 0: reaped elsewhere).
  ExitInfo Reaped(pid_t r, int st);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  int report_fd_ = -1;
  int in_fd_ = -1;
  bool own_group_ = true;
  std::optional<ExitInfo> exit_;
};

}  // namespace headlab
