#include "worker/command_run.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/sha256.h"
#include "common/testing/temp_dir.h"

namespace headlab {
namespace {

// Runs RunCommandExec(manifest) in a child process with stdout to `events`; returns its
// exit status.
int RunInChild(const std::string& manifest, const std::string& events) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen(events.c_str(), "w", stdout)) ::_exit(99);
    std::freopen("/dev/null", "w", stderr);
    ::_exit(RunCommandExec(manifest));
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::vector<Json> Lines(const std::string& path) {
  std::vector<Json> out;
  auto text = ReadFile(path);
  REQUIRE(text.ok());
  size_t start = 0;
  while (start < text->size()) {
    size_t nl = text->find('\n', start);
    out.push_back(Json::parse(text->substr(start, nl - start)));
    start = nl + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("CommandArgv: interpreter from PATH, relative programs, arguments, errors") {
  testing::TempDir dir;
  REQUIRE(WriteFileAtomic(dir.path() + "/t.sh", "#!/bin/sh\n").ok());
  auto argv = CommandArgv(
      Json{{"command", {{"program", "t.sh"}, {"interpreter", "sh"}, {"args", " --a 1  b "}}}},
      dir.path());
  REQUIRE(argv.ok());
  CHECK((*argv)[0].rfind("/", 0) == 0);  // found in PATH
  CHECK((*argv)[1] == dir.path() + "/t.sh");
  CHECK(std::vector<std::string>(argv->begin() + 2, argv->end()) ==
        std::vector<std::string>{"--a", "1", "b"});
  CHECK(CommandArgv(Json{{"command", {{"program", "t.sh"}}}}, dir.path()).status().message() ==
        "command.program: " + dir.path() +
            "/t.sh is not executable; set command.interpreter "
            "(e.g. \"python3\")");
  ::chmod((dir.path() + "/t.sh").c_str(), 0755);
  CHECK(CommandArgv(Json{{"command", {{"program", "t.sh"}}}}, dir.path()).ok());
  CHECK(CommandArgv(Json{{"command", {{"program", "nope.py"}}}}, dir.path()).status().message() ==
        "command.program: " + dir.path() + "/nope.py: no such file");
  CHECK(!CommandArgv(Json{{"command", {{"program", "t.sh"}, {"interpreter", "no-such-interp"}}}},
                     dir.path())
             .ok());
}

TEST_CASE("a command attempt: config, environment, reports, output log, exit status") {
  testing::TempDir dir;
  const std::string run_dir = dir.path() + "/runs/5-2";
  REQUIRE(MakeDirs(run_dir).ok());
  // The program checks what it was given and reports on fd 3.
  const std::string script = dir.path() + "/prog.sh";
  REQUIRE(
      WriteFileAtomic(
          script,
          "test \"$(pwd)\" = \"$HEADLAB_RUN_DIR\" || exit 7\n"
          "grep -q '\"lr\": 0.5' \"$HEADLAB_CONFIG\" || exit 8\n"
          "echo \"attempt $HEADLAB_ATTEMPT resume $HEADLAB_RESUME_STEP $HEADLAB_RESUME_KIND\"\n"
          "echo '{\"ev\":\"metric\",\"step\":1,\"key\":\"train.loss\",\"value\":3}' >&$HEADLAB_FD\n"
          "echo 'garbage' >&$HEADLAB_FD\n"
          "printf w > w.bin\n"
          "echo '{\"ev\":\"artifact\",\"kind\":\"checkpoint\",\"path\":\"w.bin\",\"step\":1}' >&3\n"
          "echo '{\"ev\":\"summary\",\"values\":{\"eval.loss\":1.25}}' >&3\n"
          "echo oops >&2\n"
          "exit ${EXIT_WITH:-0}\n")
          .ok());
  Json manifest = {{"run", 5},
                   {"attempt", 2},
                   {"experiment", 1},
                   {"config",
                    {{"kind", "command"},
                     {"train", {{"lr", 0.5}}},
                     {"command", {{"program", script}, {"interpreter", "sh"}}}}},
                   {"out_dir", run_dir},
                   {"resume", {{"path", "/ck"}, {"sha256", "x"}, {"step", 40}}},
                   {"parent", nullptr}};
  REQUIRE(WriteFileAtomic(run_dir + "/manifest.json", manifest.dump()).ok());
  const std::string events = dir.path() + "/events.jsonl";
  REQUIRE(RunInChild(run_dir + "/manifest.json", events) == 0);
  std::vector<Json> ev = Lines(events);
  REQUIRE(ev.size() == 5);
  CHECK(ev[0]["ev"] == "provenance");
  CHECK(ev[0]["fields"]["command_sha256"] == *Sha256File(script));
  CHECK(ev[0]["fields"]["command_program"] == script);
  CHECK(ev[1]["key"] == "train.loss");
  CHECK(ev[2]["ev"] == "artifact");
  CHECK(ev[2]["sha256"] == Sha256Hex("w"));
  CHECK(ev[3] == Json::parse(R"({"ev":"summary","values":{"train.loss":3.0,"eval.loss":1.25}})"));
  CHECK(ev[4]["kind"] == "log");
  auto log = ReadFile(run_dir + "/output.log");
  REQUIRE(log.ok());
  CHECK(log->find("attempt 2 resume 40 resume") != std::string::npos);
  CHECK(log->find("oops") != std::string::npos);
  CHECK(log->find("report line 2 ignored: not a JSON line") != std::string::npos);
  CHECK(ev[4]["sha256"] == Sha256Hex(*log));
  // The program's exit status is the attempt's.
  ::setenv("EXIT_WITH", "3", 1);
  CHECK(RunInChild(run_dir + "/manifest.json", events) == 3);
  ::unsetenv("EXIT_WITH");
  // A program that cannot start is bad input (2), with nothing run.
  manifest["config"]["command"]["program"] = dir.path() + "/missing.py";
  REQUIRE(WriteFileAtomic(run_dir + "/manifest.json", manifest.dump()).ok());
  CHECK(RunInChild(run_dir + "/manifest.json", events) == 2);
}

}  // namespace headlab
