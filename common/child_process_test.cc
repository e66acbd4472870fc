#include "common/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include <catch2/catch.hpp>

namespace headlab {
namespace {

// Returns true iff `pid` exists and is not a zombie (an orphan's new parent may be slow
// to reap, or not reap at all in a container).
bool Running(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

}  // namespace

TEST_CASE("ChildProcess: working directory and a report pipe on fd 3") {
  SpawnOptions opt;
  opt.cwd = "/tmp";
  opt.report_fd = 3;
  auto c = ChildProcess::Spawn({"/bin/sh", "-c", "pwd; echo report-line >&3"}, {}, opt);
  REQUIRE(c.ok());
  REQUIRE((*c)->report_fd() >= 0);
  std::string out, rep;
  std::optional<ExitInfo> exit;
  for (int i = 0; i < 2000 && !exit; ++i) {
    if ((*c)->stdout_fd() >= 0) (*c)->Read((*c)->stdout_fd(), &out);
    if ((*c)->report_fd() >= 0) (*c)->Read((*c)->report_fd(), &rep);
    if ((*c)->stdout_fd() < 0 && (*c)->report_fd() < 0) exit = (*c)->TryReap();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(exit.has_value());
  CHECK(exit->exit_code == 0);
  CHECK(out == "/tmp\n");
  CHECK(rep == "report-line\n");
  // A working directory that does not exist fails the spawn itself, naming it.
  opt.cwd = "/nonexistent-dir-of-headlab";
  auto bad = ChildProcess::Spawn({"/bin/true"}, {}, opt);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("/nonexistent-dir-of-headlab") != std::string::npos);
}

TEST_CASE("ChildProcess: environment, pipes and exit status") {
  auto c = ChildProcess::Spawn({"/bin/sh", "-c", "echo \"$HL_X\"; echo e >&2; exit 5"},
                               {{"HL_X", "override"}});
  REQUIRE(c.ok());
  std::string out, err;
  std::optional<ExitInfo> exit;
  for (int i = 0; i < 2000 && !exit; ++i) {
    if ((*c)->stdout_fd() >= 0) (*c)->Read((*c)->stdout_fd(), &out);
    if ((*c)->stderr_fd() >= 0) (*c)->Read((*c)->stderr_fd(), &err);
    if ((*c)->stdout_fd() < 0 && (*c)->stderr_fd() < 0) exit = (*c)->TryReap();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(exit.has_value());
  CHECK(exit->exit_code == 5);
  CHECK(exit->Describe() == "exit 5");
  CHECK(out == "override\n");
  CHECK(err == "e\n");
  CHECK(::getpgid((*c)->pid()) < 0);  // reaped: no zombie left behind
}

TEST_CASE("ChildProcess: a stdin pipe carries more than the pipe buffer") {
  ::signal(SIGPIPE, SIG_IGN);  // as the coordinator and the worker do
  SpawnOptions opt;
  opt.stdin_pipe = true;
  auto c = ChildProcess::Spawn({"/usr/bin/wc", "-c"}, {}, opt);
  REQUIRE(c.ok());
  const std::string data(1 << 20, 'x');  // 16 times a default pipe buffer
  size_t offset = 0;
  std::string out;
  for (int i = 0; i < 5000 && (*c)->stdout_fd() >= 0; ++i) {
    if ((*c)->stdin_fd() >= 0) REQUIRE((*c)->Write(data, &offset));
    (*c)->Read((*c)->stdout_fd(), &out);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(offset == data.size());
  CHECK((*c)->stdin_fd() < 0);  // closed once written: wc saw EOF
  CHECK(out == std::to_string(data.size()) + "\n");
  CHECK((*c)->Wait().exit_code == 0);
  // A child that exits without reading: the write fails instead of blocking.
  auto gone = ChildProcess::Spawn({"/bin/true"}, {}, opt);
  REQUIRE(gone.ok());
  (*gone)->Wait();
  size_t off = 0;
  CHECK_FALSE((*gone)->Write(data, &off));
  CHECK((*gone)->stdin_fd() < 0);
}

TEST_CASE("ChildProcess dies with the process that spawned it") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  pid_t middle = ::fork();
  REQUIRE(middle >= 0);
  if (middle == 0) {
    // Spawn a long child, report its pid, then die without any cleanup.
    auto c = ChildProcess::Spawn({"/bin/sleep", "30"}, {});
    pid_t pid = c.ok() ? (*c)->pid() : -1;
    ssize_t ignored = ::write(p[1], &pid, sizeof pid);
    (void)ignored;
    ::_exit(0);
  }
  ::close(p[1]);
  pid_t grandchild = -1;
  REQUIRE(::read(p[0], &grandchild, sizeof grandchild) == sizeof grandchild);
  ::close(p[0]);
  REQUIRE(grandchild > 0);
  int st;
  REQUIRE(::waitpid(middle, &st, 0) == middle);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    // The orphan is reparented (to init or a subreaper), which reaps it once killed.
    gone = !Running(grandchild);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!gone) ::kill(grandchild, SIGKILL);
  CHECK(gone);
}

TEST_CASE("ChildProcess: stdout and stderr appended to a file, Wait") {
  const std::string log = "/tmp/headlab-child-" + std::to_string(::getpid()) + ".log";
  { std::ofstream(log) << "before\n"; }
  SpawnOptions opt;
  opt.stdout_to = opt.stderr_to = SpawnOptions::Output::kFile;
  opt.output_file = log;
  auto c = ChildProcess::Spawn({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, {}, opt);
  REQUIRE(c.ok());
  CHECK((*c)->stdout_fd() < 0);
  CHECK((*c)->stderr_fd() < 0);
  CHECK((*c)->Wait().exit_code == 3);
  CHECK((*c)->TryReap()->exit_code == 3);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "before\nout\nerr\n");
  ::unlink(log.c_str());

  opt.output_file = "/nonexistent-dir/x.log";
  auto bad = ChildProcess::Spawn({"/bin/true"}, {}, opt);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("/nonexistent-dir/x.log") != std::string::npos);
}

TEST_CASE("ChildProcess: stdout to /dev/null, PATH search, a missing program") {
  SpawnOptions opt;
  opt.stdout_to = SpawnOptions::Output::kNull;
  opt.search_path = true;
  auto c = ChildProcess::Spawn({"sh", "-c", "echo hidden; echo shown >&2"}, {}, opt);
  REQUIRE(c.ok());
  CHECK((*c)->stdout_fd() < 0);
  std::string err;
  while ((*c)->stderr_fd() >= 0) {
    (*c)->Read((*c)->stderr_fd(), &err);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK((*c)->Wait().exit_code == 0);
  CHECK(err == "shown\n");

  CHECK(!ChildProcess::Spawn({"sh", "-c", "true"}, {}).ok());  // a path unless search_path
  auto missing = ChildProcess::Spawn({"headlab-no-such-program"}, {}, opt);
  REQUIRE(!missing.ok());
  CHECK(missing.status().message().find("cannot execute headlab-no-such-program") !=
        std::string::npos);
}

TEST_CASE("ChildProcess: a new session, and Release leaves the child running") {
  SpawnOptions opt;
  opt.new_session = true;
  opt.die_with_parent = false;
  opt.stdout_to = opt.stderr_to = SpawnOptions::Output::kNull;
  pid_t pid = -1;
  {
    auto c = ChildProcess::Spawn({"/bin/sleep", "30"}, {}, opt);
    REQUIRE(c.ok());
    pid = (*c)->Release();
  }
  REQUIRE(pid > 0);
  CHECK(Running(pid));  // the destructor left it alone
  for (int i = 0; i < 200 && ::getsid(pid) != pid; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(::getsid(pid) == pid);
  CHECK(::getpgid(pid) == pid);
  ::kill(pid, SIGKILL);
  int st;
  CHECK(::waitpid(pid, &st, 0) == pid);
}

}  // namespace headlab
