// The coordinator's side of a query child, against stand-in children (shell scripts):
// the real `headlab query-child` is exercised by tests/service_attack_test.sh.
#include "coordinator/query_child.h"

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/testing/temp_dir.h"

namespace headlab::coord {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// Writes an executable shell script `name` in `dir` running `body`; returns its path.
std::string Script(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  REQUIRE(WriteFileAtomic(path, "#!/bin/sh\n" + body + "\n", 0755).ok());
  return path;
}

// Returns true iff the process whose pid is in `pid_file` is still running (not a zombie).
bool StillRunning(const std::string& pid_file) {
  auto pid = ReadFile(pid_file);
  REQUIRE(pid.ok());
  std::ifstream in("/proc/" + std::string(pid->substr(0, pid->find('\n'))) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && stat[paren + 2] != 'Z';
}

// A child that ignores its request and never answers, like a query stuck inside one
// function call; it writes its pid to DIR/pid.
struct StuckChild {
  testing::TempDir tmp{"headlab-query-child"};
  std::string binary =
      Script(tmp.path(), "stuck", "echo $$ >" + tmp.path() + "/pid; exec sleep 60");
  bool running() const { return StillRunning(tmp.path() + "/pid"); }
};

double Seconds(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

}  // namespace

TEST_CASE("RunQueryInChild: the answer passes through, errors keep their kind") {
  ::signal(SIGPIPE, SIG_IGN);  // as the coordinator does
  testing::TempDir tmp("headlab-query-child");
  const std::string d = tmp.path();
  QueryLimits limits;
  limits.time = milliseconds(5000);
  // The child reads the whole request before answering.
  std::string ok = Script(d, "ok", "cat >" + d + "/request; printf 'ok\\n{\"rows\": [[1]]}'");
  auto text =
      RunQueryInChild(ok, "/some/db", std::string(300000, ' ') + "SELECT 1", limits, nullptr);
  REQUIRE(text.ok());
  CHECK(*text == "{\"rows\": [[1]]}");
  auto request = ReadFile(d + "/request");
  REQUIRE(request.ok());
  CHECK(request->find("\"db\":\"/some/db\"") != std::string::npos);
  CHECK(request->find("SELECT 1") != std::string::npos);
  CHECK(request->size() > 300000);

  std::string bad =
      Script(d, "bad", "cat >/dev/null; printf 'error 1\\nread-only: DELETE is not allowed'");
  auto refused = RunQueryInChild(bad, "/db", "DELETE FROM runs", limits, nullptr);
  REQUIRE(!refused.ok());
  CHECK(refused.status().code() == Status::Code::kInvalidArgument);
  CHECK(refused.status().message() == "read-only: DELETE is not allowed");

  std::string crash = Script(d, "crash", "cat >/dev/null; echo 'out of luck' >&2; kill -SEGV $$");
  auto crashed = RunQueryInChild(crash, "/db", "SELECT 1", limits, nullptr);
  REQUIRE(!crashed.ok());
  CHECK(crashed.status().code() == Status::Code::kInternal);
  CHECK(crashed.status().message().find("killed by signal 11") != std::string::npos);
  CHECK(crashed.status().message().find("out of luck") != std::string::npos);

  auto missing = RunQueryInChild(d + "/no-such-binary", "/db", "SELECT 1", limits, nullptr);
  CHECK(missing.status().code() == Status::Code::kInternal);
}

TEST_CASE("RunQueryInChild: a child past its deadline is killed") {
  StuckChild stuck;
  QueryLimits limits;
  limits.time = milliseconds(300);
  auto t0 = SteadyClock::now();
  auto r = RunQueryInChild(stuck.binary, "/db", "SELECT 1", limits, nullptr);
  const double s = Seconds(t0);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == Status::Code::kInvalidArgument);
  CHECK(r.status().message() == "query exceeded the 300 ms limit");
  // The limit plus kQueryKillGrace, and not much more.
  CHECK(s >= 1.2);
  CHECK(s < 1.2 + 1.0);
  CHECK_FALSE(stuck.running());
}

TEST_CASE("RunQueryInChild: the client leaving kills the child") {
  StuckChild stuck;
  QueryLimits limits;
  limits.time = milliseconds(30000);
  std::atomic<bool> gone{false};
  std::thread leave([&] {
    std::this_thread::sleep_for(milliseconds(300));
    gone = true;
  });
  auto t0 = SteadyClock::now();
  auto r = RunQueryInChild(stuck.binary, "/db", "SELECT 1", limits, &gone);
  const double s = Seconds(t0);
  leave.join();
  REQUIRE(!r.ok());
  CHECK(r.status().code() == Status::Code::kCancelled);
  CHECK(s < 1.5);
  CHECK_FALSE(stuck.running());
  // Gone before it starts: nothing is spawned.
  CHECK(RunQueryInChild(stuck.tmp.path() + "/no-such-binary", "/db", "SELECT 1", limits, &gone)
            .status()
            .code() == Status::Code::kCancelled);
}

TEST_CASE("RunQueryInChild: an answer over the byte cap is refused, not kept") {
  testing::TempDir tmp("headlab-query-child");
  const std::string d = tmp.path();
  std::string flood = Script(d, "flood", "cat >/dev/null; echo ok; exec cat /dev/zero");
  QueryLimits limits;
  limits.max_bytes = 1 << 20;
  auto r = RunQueryInChild(flood, "/db", "SELECT 1", limits, nullptr);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == Status::Code::kInternal);
  CHECK(r.status().message().find("answer is over") != std::string::npos);
}

}  // namespace headlab::coord
