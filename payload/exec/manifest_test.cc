#include "payload/exec/manifest.h"

#include <cstdio>
#include <string>

#include <unistd.h>

#include "common/files.h"
#include "common/run_config.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/exec_main.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

const char* kGood =
    R"({"run": 7, "attempt": 1, "experiment": 3, "config": {"kind": "noop"},
        "out_dir": "/tmp/x", "resume": null})";

TEST_CASE("manifest: a good manifest parses") {
  StatusOr<Manifest> m = ParseManifest(kGood, "m.json");
  REQUIRE(m.ok());
  CHECK(m->run == 7);
  CHECK(m->attempt == 1);
  CHECK(m->out_dir == "/tmp/x");
  CHECK(!m->resume);
}

TEST_CASE("manifest: a shared parent checkpoint parses beside resume") {
  const std::string sha(64, 'a');
  StatusOr<Manifest> m = ParseManifest(
      R"({"run": 9, "attempt": 1, "config": {}, "out_dir": "/tmp/x", "resume": null,
          "parent": {"run": 4, "path": "/p/ckpt.pt", "sha256": ")" +
          sha + R"(", "step": 20}})",
      "m.json");
  REQUIRE(m.ok());
  CHECK(!m->resume);
  REQUIRE(m->parent);
  CHECK(m->parent->path == "/p/ckpt.pt");
  CHECK(m->parent->step == 20);
  CHECK(m->parent_run == 4);
  StatusOr<Manifest> bad = ParseManifest(
      R"({"run": 9, "attempt": 1, "config": {}, "out_dir": "/tmp/x",
          "parent": {"path": "/p", "sha256": ")" +
          sha + R"(", "step": 20}})",
      "m.json");
  CHECK(bad.status().message() == "m.json: $.parent.run: expected an integer or string");
  bad = ParseManifest(
      R"({"run": 9, "attempt": 1, "config": {}, "out_dir": "/tmp/x",
          "parent": {"run": 4, "path": "/p", "sha256": "xyz", "step": 20}})",
      "m.json");
  CHECK(bad.status().message() ==
        "m.json: $.parent.sha256: expected 64 lowercase hex digits, got \"xyz\"");
}

TEST_CASE("manifest: errors name the file and the field") {
  struct Case {
    const char* text;
    const char* field;
  } cases[] = {
      {R"({"attempt": 0, "config": {}, "out_dir": "/a"})", "m.json: $.run: missing"},
      {R"({"run": 1, "attempt": -1, "config": {}, "out_dir": "/a"})", "m.json: $.attempt:"},
      {R"({"run": 1, "attempt": 0, "config": [], "out_dir": "/a"})", "m.json: $.config:"},
      {R"({"run": 1, "attempt": 0, "config": {}, "out_dir": "rel"})", "m.json: $.out_dir:"},
      {R"({"run": 1, "attempt": 0, "config": {}, "out_dir": "/a", "bogus": 1})",
       "m.json: $.bogus:"},
      {R"({"run": 1, "attempt": 0, "config": {}, "out_dir": "/a",
           "resume": {"path": "/c", "sha256": "xyz", "step": 1}})",
       "m.json: $.resume.sha256:"},
      {R"({"run": 1, "attempt": 0, "config": {}, "out_dir": "/a",
           "resume": {"path": "/c", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}})",
       "m.json: $.resume.step:"},
      {"{not json", "m.json: invalid JSON"},
  };
  for (const Case& c : cases) {
    StatusOr<Manifest> m = ParseManifest(c.text, "m.json");
    INFO(c.text);
    REQUIRE(!m.ok());
    CHECK(m.status().code() == Status::Code::kInvalidArgument);
    CHECK(m.status().message().find(c.field) == 0);
  }
}

TEST_CASE("exec config: reads every key of the default config") {
  StatusOr<ExecConfig> c = ExecConfigFromJson(DefaultRunConfig(), "m.json");
  REQUIRE(c.ok());
  CHECK(c->model.width == 128);
  CHECK(c->train.lr == Approx(3e-3));
  CHECK(c->data.source == "builtin");
  Json broken = DefaultRunConfig();
  broken["train"].erase("lr");
  StatusOr<ExecConfig> bad = ExecConfigFromJson(broken, "m.json");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "m.json: $.config.train.lr: missing");
}

// Writes `text` to a temp file and runs `headlab exec` on it; returns the exit status.
int ExecOn(const std::string& text) {
  char path[] = "/tmp/headlab_exec_manifest_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  REQUIRE(WriteFileAtomic(path, text).ok());
  char arg0[] = "exec";
  char* argv[] = {arg0, path, nullptr};
  int rc = ExecMain(2, argv);
  std::remove(path);
  return rc;
}

TEST_CASE("exec: bad manifest or config exits 2") {
  CHECK(ExecOn("{") == 2);
  CHECK(ExecOn(R"({"run": 1, "attempt": 0, "config": {"model": {"layers": "two"}},
                   "out_dir": "/tmp/x"})") == 2);
  CHECK(ExecOn(R"({"run": 1, "attempt": 0, "config": {"train": {"lrr": 1}},
                   "out_dir": "/tmp/x"})") == 2);
  char arg0[] = "exec";
  char* argv[] = {arg0, nullptr};
  CHECK(ExecMain(1, argv) == 2);
}

TEST_CASE("exec: a bad method section is refused before training (exit 2)") {
  for (const char* method : {R"("aah": {"regime": "full_adaptive", "hierarchy": "x"})",
                             R"("saf": {"method": "replace", "heads": "9.9"})"}) {
    INFO(method);
    CHECK(ExecOn(std::string(R"({"run": 1, "attempt": 0, "config": {)") + method +
                 R"(, "train": {"steps": 1}}, "out_dir": "/tmp/x"})") == 2);
  }
}

TEST_CASE("exec: the noop kind succeeds") {
  CHECK(ExecOn(R"({"run": 1, "attempt": 0, "config": {"kind": "noop", "noop": {"metrics": 2}},
                   "out_dir": "/tmp/x"})") == 0);
}

}  // namespace
}  // namespace headlab
