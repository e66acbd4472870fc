// fork/execve with pipes and a process group. Everything the child needs (argv, envp, the
// files for its stdout and stderr) is made before fork, so the child only calls
// async-signal-safe functions.
#include "common/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace headlab {
namespace {

// Closes both ends of a pipe pair that is still open.
void ClosePair(int p[2]) {
  for (int i = 0; i < 2; ++i)
    if (p[i] >= 0) ::close(p[i]);
}

}  // namespace

std::string ExitInfo::Describe() const {
  if (signal != 0) return "killed by signal " + std::to_string(signal);
  if (exit_code != 0) return "exit " + std::to_string(exit_code);
  return "";
}

StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::map<std::string, std::string>& env_overrides) {
  return Spawn(argv, env_overrides, SpawnOptions());
}

StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::map<std::string, std::string>& env_overrides,
    const SpawnOptions& options) {
  using Output = SpawnOptions::Output;
  if (argv.empty()) return Status::InvalidArgument("spawn: empty argv");
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    if (!env_overrides.count(key)) env_strings.push_back(std::move(kv));
  }
  for (const auto& [k, v] : env_overrides) env_strings.push_back(k + "=" + v);
  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : env_strings) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  // The exec-error pipe is close-on-exec: a successful execve closes it (EOF, no bytes);
  // a failed one writes errno into it. That turns "binary missing" into a Spawn error.
  int out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1}, rep[2] = {-1, -1}, in[2] = {-1, -1};
  const bool report = options.report_fd >= 0;
  const bool pipe_out = options.stdout_to == Output::kPipe;
  const bool pipe_err = options.stderr_to == Output::kPipe;
  // What the child's fd 1 and 2 become when not a pipe (-1: left as the caller's).
  int file_fd = -1, null_fd = -1;
  auto close_all = [&] {
    ClosePair(out), ClosePair(err), ClosePair(ex), ClosePair(rep), ClosePair(in);
    if (file_fd >= 0) ::close(file_fd);
    if (null_fd >= 0) ::close(null_fd);
  };
  if ((pipe_out && ::pipe2(out, O_CLOEXEC) != 0) || (pipe_err && ::pipe2(err, O_CLOEXEC) != 0) ||
      ::pipe2(ex, O_CLOEXEC) != 0 || (report && ::pipe2(rep, O_CLOEXEC) != 0) ||
      (options.stdin_pipe && ::pipe2(in, O_CLOEXEC) != 0)) {
    int e = errno;
    close_all();
    return Status::IoError(std::string("spawn: pipe: ") + std::strerror(e));
  }
  if (options.stdout_to == Output::kFile || options.stderr_to == Output::kFile) {
    file_fd = ::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (file_fd < 0) {
      int e = errno;
      close_all();
      return Status::IoError("spawn: " + options.output_file + ": cannot open (" +
                             std::strerror(e) + ")");
    }
  }
  if (options.stdout_to == Output::kNull || options.stderr_to == Output::kNull)
    null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  auto child_fd = [&](Output o, int pipe_write) {
    return o == Output::kPipe   ? pipe_write
           : o == Output::kFile ? file_fd
           : o == Output::kNull ? null_fd
                                : -1;
  };
  const int child_out = child_fd(options.stdout_to, out[1]);
  const int child_err = child_fd(options.stderr_to, err[1]);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    close_all();
    if (devnull >= 0) ::close(devnull);
    return Status::IoError(std::string("spawn: fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    if (options.new_session)
      ::setsid();
    else if (options.own_group)
      ::setpgid(0, 0);
    if (options.die_with_parent) {
      // If we die (even by SIGKILL), the child dies with us: the coordinator will have
      // requeued its attempt elsewhere, so an orphan would only burn the host's devices.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    }
    // Undo what the caller changed: ignored SIGPIPE and blocked signals survive execve.
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD}) ::sigaction(s, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (in[0] >= 0)
      ::dup2(in[0], 0);
    else if (devnull >= 0)
      ::dup2(devnull, 0);
    if (child_out >= 0) ::dup2(child_out, 1);
    if (child_err >= 0) ::dup2(child_err, 2);
    int e = 0;
    // dup2 clears close-on-exec on the copy: the program keeps its report fd.
    if (report && rep[1] == options.report_fd)
      ::fcntl(rep[1], F_SETFD, 0);
    else if (report && ::dup2(rep[1], options.report_fd) < 0)
      e = errno;
    if (!e && !options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) e = errno;
    if (!e) {
      if (options.search_path)
        ::execvpe(cargv[0], cargv.data(), cenv.data());
      else
        ::execve(cargv[0], cargv.data(), cenv.data());
      e = errno;
    }
    ssize_t ignored = ::write(ex[1], &e, sizeof e);
    (void)ignored;
    ::_exit(127);
  }
  // Also set the group from the parent: whichever runs first wins, so a signal sent right
  // after Spawn returns always reaches the group. (A new session's leader sets its own.)
  const bool own_group = options.own_group || options.new_session;
  if (options.own_group && !options.new_session) ::setpgid(pid, pid);
  for (int* fd : {&out[1], &err[1], &ex[1], &rep[1], &in[0], &file_fd, &null_fd, &devnull}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }

  std::unique_ptr<ChildProcess> c(new ChildProcess());
  c->pid_ = pid;
  c->out_fd_ = out[0];
  c->err_fd_ = err[0];
  c->report_fd_ = rep[0];
  c->in_fd_ = in[1];
  c->own_group_ = own_group;
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(ex[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  ::close(ex[0]);
  if (n == ssize_t(sizeof exec_errno)) {
    // The destructor reaps the child (it has already _exit-ed or is about to).
    return Status::IoError("spawn: cannot execute " + argv[0] +
                           (options.cwd.empty() ? "" : " in " + options.cwd) + ": " +
                           std::strerror(exec_errno));
  }
  for (int fd : {c->out_fd_, c->err_fd_, c->report_fd_, c->in_fd_})
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return c;
}

ChildProcess::~ChildProcess() {
  ClosePipes();
  if (pid_ > 0 && !exit_) {
    if (own_group_) ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int st;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

void ChildProcess::CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

void ChildProcess::ClosePipes() {
  CloseFd(&in_fd_);
  CloseFd(&out_fd_);
  CloseFd(&err_fd_);
  CloseFd(&report_fd_);
}

bool ChildProcess::Read(int fd, std::string* out) {
  int* slot = fd == out_fd_      ? &out_fd_
              : fd == err_fd_    ? &err_fd_
              : fd == report_fd_ ? &report_fd_
                                 : nullptr;
  if (slot == nullptr || fd < 0) return false;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out->append(buf, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    CloseFd(slot);  // EOF or a real error
    return false;
  }
}

bool ChildProcess::Write(const std::string& data, size_t* offset) {
  if (in_fd_ < 0) return false;
  while (*offset < data.size()) {
    ssize_t n = ::write(in_fd_, data.data() + *offset, data.size() - *offset);
    if (n > 0) {
      *offset += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    CloseFd(&in_fd_);  // EPIPE: the child is gone or closed its stdin
    return false;
  }
  CloseFd(&in_fd_);
  return true;
}

void ChildProcess::CloseStdin() { CloseFd(&in_fd_); }

bool ChildProcess::SignalGroup(int sig) {
  if (pid_ <= 0 || exit_) return false;
  return (own_group_ && ::kill(-pid_, sig) == 0) || ::kill(pid_, sig) == 0;
}

std::optional<ExitInfo> ChildProcess::TryReap() {
  if (exit_ || pid_ <= 0) return exit_;
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  return Reaped(r, st);
}

ExitInfo ChildProcess::Wait() {
  if (exit_ || pid_ <= 0) return exit_.value_or(ExitInfo{-1, 0});
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, 0);
  } while (r < 0 && errno == EINTR);
  return Reaped(r, st);
}

ExitInfo ChildProcess::Reaped(pid_t r, int st) {
  ExitInfo info;
  if (r < 0) {
    info.exit_code = -1;  // ECHILD: someone else reaped it; report it honestly as a failure
  } else if (WIFSIGNALED(st)) {
    info.signal = WTERMSIG(st);
    info.exit_code = 128 + info.signal;
  } else {
    info.exit_code = WEXITSTATUS(st);
  }
  // The attempt's process group dies with its leader: nothing it forked may outlive it
  // (a stray grandchild would also keep our pipes open).
  if (own_group_) ::kill(-pid_, SIGKILL);
  exit_ = info;
  return info;
}

pid_t ChildProcess::Release() {
  ClosePipes();
  const pid_t pid = pid_;
  pid_ = -1;
  return pid;
}

}  // namespace headlab
