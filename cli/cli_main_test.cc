// Exit-code contracts of the CLI commands (0 ok, 1 failed, 2 bad input), driven through
// CliMain as the binary would be.
#include "cli/cli_main.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/test_util.h"
#include "common/files.h"
#include "common/source_dir.h"
#include "common/testing/temp_dir.h"

namespace {

int Run(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return headlab::CliMain(int(args.size()), argv.data());
}

const std::string kSrc = headlab::SourceDir();

}  // namespace

TEST_CASE("Every CLI command answers --help with exit 0") {
  for (const char* c : {"submit", "status", "runs", "show", "cancel", "retry", "wait", "results",
                        "query", "export", "up", "down"}) {
    CHECK(headlab::IsCliCommand(c));
    CHECK(Run({c, "--help"}) == 0);
  }
  CHECK(!headlab::IsCliCommand("coordinator"));
}

TEST_CASE("Bad input exits 2") {
  CHECK(Run({"submit"}) == 2);                                       // missing FILE
  CHECK(Run({"runs", "1", "--bogus"}) == 2);                         // unknown option
  CHECK(Run({"runs", "abc"}) == 2);                                  // not an id
  CHECK(Run({"submit", "/nonexistent/grid.jsonc"}) == 2);           // unreadable file
  CHECK(Run({"submit", kSrc + "/experiments", "--dry-run"}) == 2);  // a directory
  CHECK(Run({"submit", kSrc + "/experiments/tests/bad_empty_axis.jsonc", "--dry-run"}) == 2);
  CHECK(Run({"submit", kSrc + "/experiments/demo.jsonc", "--dry-run", "--set", "x.y=1"}) == 2);
  CHECK(Run({"wait", "1", "--timeout", "soon"}) == 2);
  CHECK(Run({"export", "1", "--format", "xml"}) == 2);
  CHECK(Run({"status", "--url", "ftp://x"}) == 2);
  CHECK(Run({"status", "--token-file", "/nonexistent/token"}) == 2);
  CHECK(Run({"up", "--http", "nope", "--data-dir", "/tmp"}) == 2);
}

TEST_CASE("A dry run needs no coordinator") {
  CHECK(Run({"submit", kSrc + "/experiments/demo.jsonc", "--dry-run", "--url", headlab::DeadLoopbackUrl()}) == 0);
  CHECK(Run({"submit", kSrc + "/experiments/tests/six_runs.jsonc", "--dry-run", "--json",
             "--set", "seed=1,2"}) == 0);
}

TEST_CASE("An unreachable coordinator exits 1") {
  std::string url = headlab::DeadLoopbackUrl();
  CHECK(Run({"status", "--url", url}) == 1);
  CHECK(Run({"runs", "1", "--url", url}) == 1);
  CHECK(Run({"submit", kSrc + "/experiments/demo.jsonc", "--url", url}) == 1);
  CHECK(Run({"wait", "1", "--timeout", "0.5", "--url", url}) == 1);
}

TEST_CASE("down: nothing to stop is fine; a stale up.json is cleared") {
  const headlab::testing::TempDir tmp("headlab-cli-down");
  REQUIRE(!tmp.path().empty());
  const std::string dir = tmp.path();
  CHECK(Run({"down", "--data-dir", dir}) == 0);
  // Pids above the kernel's pid_max (2^22) cannot exist: both count as already stopped.
  REQUIRE(headlab::WriteFileAtomic(dir + "/up.json",
                                   R"({"coordinator_pid": 5000001, "worker_pid": 5000002})")
              .ok());
  CHECK(Run({"down", "--data-dir", dir}) == 0);
  CHECK(!headlab::PathExists(dir + "/up.json"));
  REQUIRE(headlab::WriteFileAtomic(dir + "/up.json", "not json").ok());
  CHECK(Run({"down", "--data-dir", dir}) == 2);
}
