// Exit-code contracts of the CLI commands (0 ok, 1 failed, 2 bad input), driven through
// CliMain as the binary would be.
#include "cli/cli_main.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/cli_context.h"
#include "cli/resolve.h"
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
                        "query", "export", "up", "down", "logs", "artifacts", "tag", "note"}) {
    CHECK(headlab::IsCliCommand(c));
    CHECK(Run({c, "--help"}) == 0);
  }
  CHECK(!headlab::IsCliCommand("coordinator"));
}

TEST_CASE("Bad input exits 2") {
  CHECK(Run({"submit"}) == 2);                                      // missing FILE
  CHECK(Run({"runs", "1", "--bogus"}) == 2);                        // unknown option
  CHECK(Run({"runs", "a b"}) == 2);                                 // neither id nor name
  CHECK(Run({"runs", "0"}) == 2);                                   // not an id
  CHECK(Run({"cancel", "7"}) == 2);                                 // run or experiment?
  CHECK(Run({"cancel", "run"}) == 2);                               // which run?
  CHECK(Run({"tag", "7", "good"}) == 2);                            // run or experiment?
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

// A mistyped command used to get no suggestion.
TEST_CASE("A mistyped command gets the closest one") {
  CHECK(headlab::SuggestCommand("reslts") == "results");
  CHECK(headlab::SuggestCommand("sumbit") == "submit");
  CHECK(headlab::SuggestCommand("log") == "logs");
  CHECK(headlab::SuggestCommand("coordinater") == "coordinator");
  CHECK(headlab::SuggestCommand("xyzzy").empty());
  CHECK(Run({"reslts", "1"}) == 2);
}

TEST_CASE("A dry run needs no coordinator") {
  CHECK(Run({"submit", kSrc + "/experiments/demo.jsonc", "--dry-run", "--url",
             headlab::DeadLoopbackUrl()}) == 0);
  CHECK(Run({"submit", kSrc + "/experiments/tests/six_runs.jsonc", "--dry-run", "--json", "--set",
             "seed=1,2"}) == 0);
  // The four-GPU gang grid is accepted as it stands.
  CHECK(Run({"submit", kSrc + "/experiments/measure/saf_update_1b_4gpu.jsonc", "--dry-run"}) == 0);
  // So is the 8B-shape decode grid (the llama3.1-8b preset, 16 streaming heads per layer).
  CHECK(Run({"submit", kSrc + "/experiments/measure/aoh_decode_8b_gpu.jsonc", "--dry-run"}) == 0);
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

// `status --data-dir D` used to dial 8321 although D/coordinator.json had the address.
TEST_CASE("The URL comes from --url, HEADLAB_URL, DIR/coordinator.json, then the default") {
  const headlab::testing::TempDir tmp("headlab-cli-url");
  const std::string dir = tmp.path();
  REQUIRE(headlab::WriteFileAtomic(
              dir + "/coordinator.json",
              R"({"pid": 1, "http": "0.0.0.0:45678", "workers": "tcp://0.0.0.0:45679"})")
              .ok());
  auto parse = [](std::vector<std::string> argv) {
    headlab::CommandSpec spec{"status", "", "", {}, 0, 0};
    auto a = headlab::ParseArgs(spec, argv);
    REQUIRE(a.ok());
    auto c = headlab::ResolveContext("status", a.value());
    REQUIRE(c.ok());
    return c.value();
  };
  ::unsetenv("HEADLAB_URL");
  auto from_file = parse({"status", "--data-dir", dir});
  CHECK(from_file.url == "http://127.0.0.1:45678");
  CHECK(from_file.url_source == dir + "/coordinator.json");
  CHECK(parse({"status", "--data-dir", dir, "--url", "http://10.0.0.1:9"}).url ==
        "http://10.0.0.1:9");
  ::setenv("HEADLAB_URL", "http://10.0.0.2:9", 1);
  CHECK(parse({"status", "--data-dir", dir}).url == "http://10.0.0.2:9");
  ::unsetenv("HEADLAB_URL");
  // A --data-dir with no coordinator.json is no coordinator: never the default URL, which
  // may be another service's.
  auto none = parse({"status", "--data-dir", dir + "/none"});
  CHECK(none.url.empty());
  CHECK(none.url_source == "none");
  CHECK(headlab::UrlForBind("10.1.2.3:8321") == "http://10.1.2.3:8321");
}

// Experiments used to have only numbers (`results demo` failed).
TEST_CASE("An experiment is named by id or by its grid's name, the newest first") {
  headlab::Json list = headlab::Json::parse(R"([{"id": 1, "name": "demo"}, {"id": 2, "name": "saf"},
                                                {"id": 3, "name": "demo"}])");
  std::string note;
  CHECK(headlab::FindExperiment(list, "demo", &note).value() == 3);
  CHECK(note == "\"demo\" is experiment 3, the newest of 2 with that name");
  note.clear();
  CHECK(headlab::FindExperiment(list, "saf", &note).value() == 2);
  CHECK(note.empty());
  CHECK(headlab::FindExperiment(list, "2", &note).value() == 2);
  auto missing = headlab::FindExperiment(list, "dmeo", &note);
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == headlab::Status::Code::kNotFound);
  CHECK(missing.status().message().find("did you mean \"demo\"?") != std::string::npos);
}
