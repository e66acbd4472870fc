#include "payload/exec/run_kinds.h"

#include <memory>
#include <string>
#include <vector>

#include "common/run_config.h"
#include "payload/exec/event_capture.h"
#include "payload/exec/train_hooks.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

// A method that does nothing: enough to make a run "have methods".
class IdleHooks : public TrainHooks {
 public:
  const char* name() const override { return "idle"; }
};

LoadedRun RunOf(const std::string& kind, int64_t ranks) {
  StatusOr<Json> normalized = NormalizeRunConfig(
      {{"kind", kind}, {"train", {{"ranks", ranks}, {"device", "cpu"}}}}, "m.json");
  REQUIRE(normalized.ok());
  StatusOr<ExecConfig> config = ExecConfigFromJson(*normalized, "m.json");
  REQUIRE(config.ok());
  LoadedRun run;
  run.normalized = *normalized;
  run.config = *config;
  run.file = "m.json";
  return run;
}

}  // namespace

TEST_CASE("run kinds: every kind exec runs is in the table, AoH's registered from methods/aoh") {
  // The run-config schema's kinds (common/run_config.cc) less "command", which the worker
  // runs itself (worker/command_run.h).
  for (const char* name : {"train", "noop", "bench-update", "bench-prefill", "bench-decode", "mqar",
                           "passkey", "flops"}) {
    const RunKind* k = FindRunKind(name);
    REQUIRE(k != nullptr);
    CHECK(k->name == name);
    CHECK(k->run != nullptr);
    // Only train and bench-update launch data-parallel peers (dist.h).
    CHECK(k->data_parallel ==
          (std::string(name) == "train" || std::string(name) == "bench-update"));
    // The bench kinds time model.head_modes and cannot run a method's hooks.
    CHECK(k->refuses_methods.empty() == (std::string(name).rfind("bench-", 0) != 0));
  }
  CHECK(FindRunKind("command") == nullptr);
  CHECK(FindRunKind("trian") == nullptr);
}

TEST_CASE("run kinds: refusals name the manifest and the field, checked before any work") {
  EventSink events(stdout);  // nothing is written: every case is refused before running
  Status s = RunOneKind(FindRunKind("passkey"), RunOf("passkey", 2), &events);
  CHECK(s.code() == Status::Code::kInvalidArgument);
  CHECK(s.message() ==
        "m.json: $.config.train.ranks: kind \"passkey\" runs in one process; train.ranks > 1 is "
        "for kinds \"train\" and \"bench-update\"");

  LoadedRun unknown = RunOf("noop", 1);
  unknown.config.kind = "trian";
  s = RunOneKind(FindRunKind("trian"), unknown, &events);
  CHECK(s.code() == Status::Code::kInvalidArgument);
  CHECK(s.message() == "m.json: $.config.kind: run kind \"trian\" is not executable by this build");

  LoadedRun with_method = RunOf("bench-decode", 1);
  with_method.hooks.push_back(std::make_shared<IdleHooks>());
  s = RunOneKind(FindRunKind("bench-decode"), with_method, &events);
  CHECK(s.code() == Status::Code::kUnavailable);
  CHECK(s.message() ==
        "m.json: $.config.kind: bench-decode times model.head_modes only and cannot run a "
        "method's hooks (saf/aoh/aah); set the heads with model.head_modes");
}

TEST_CASE("run kinds: an accepted run goes to its kind's function") {
  Status st;
  std::vector<Json> events = testing::CaptureEvents(
      [](EventSink* sink) { return RunOneKind(FindRunKind("noop"), RunOf("noop", 1), sink); }, &st);
  REQUIRE(st.ok());
  REQUIRE(!events.empty());
  CHECK(events.back()["ev"] == "summary");  // RunNoop's last event
}

}  // namespace headlab
