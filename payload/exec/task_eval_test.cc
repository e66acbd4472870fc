#include "payload/exec/task_eval.h"

#include "common/metric_names.h"
#include "common/run_config.h"
#include "payload/exec/event_capture.h"
#include "payload/exec/test_util.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

TrainRequest TaskRun(const std::string& name, const Json& overrides) {
  Json config = {{"seed", 4},
                 {"model", {{"layers", 1}, {"heads", 2}, {"width", 32}, {"context", 192}}},
                 {"train",
                  {{"threads", 1},
                   {"batch_size", 4},
                   {"steps", 3},
                   {"warmup_steps", 1},
                   {"checkpoint_every", 0},
                   {"device", "cpu"}}},
                 {"mqar", {{"pairs", 4}, {"eval_examples", 8}}},
                 {"passkey", {{"lengths", "160"}, {"depths", "0.5"}, {"samples", 2}}}};
  config.merge_patch(overrides);
  StatusOr<Json> normalized = NormalizeRunConfig(config, "test");
  REQUIRE(normalized.ok());
  StatusOr<ExecConfig> c = ExecConfigFromJson(normalized.value(), "test");
  REQUIRE(c.ok());
  std::string dir = testing::ScratchPath("headlab_task_" + name);
  testing::RemoveTree(dir);
  return TrainRequest{c.value(), normalized.value(), dir, std::nullopt};
}

// Runs `kind`; returns the summary values (null on failure, with *status set).
Json Summary(const TrainRequest& req, Status* status) {
  Json summary;
  for (const Json& j : testing::CaptureEvents(
           [&](EventSink* sink) {
             return req.config.kind == "mqar" ? RunMqar(req, sink) : RunPasskey(req, sink);
           },
           status))
    if (j["ev"] == "summary") summary = j["values"];
  testing::RemoveTree(req.out_dir);
  return summary;
}

}  // namespace

TEST_CASE("tasks: mqar trains and evaluates at query positions, deterministically per seed") {
  Status st;
  Json a = Summary(TaskRun("mqar_a", {{"kind", "mqar"}}), &st);
  REQUIRE(st.ok());
  Json b = Summary(TaskRun("mqar_b", {{"kind", "mqar"}}), &st);
  REQUIRE(st.ok());
  CHECK(a[metric::kMqarAccuracy].get<double>() >= 0);
  CHECK(a[metric::kMqarAccuracy].get<double>() <= 1);
  CHECK(a[metric::kMqarLoss] == b[metric::kMqarLoss]);
  CHECK(a[metric::kMqarTrainLoss] == b[metric::kMqarTrainLoss]);
  Json c = Summary(TaskRun("mqar_c", {{"kind", "mqar"}, {"seed", 5}}), &st);
  REQUIRE(st.ok());
  CHECK(a[metric::kMqarLoss] != c[metric::kMqarLoss]);
  // A spec the model cannot hold is refused before any work.
  Summary(TaskRun("mqar_bad", {{"kind", "mqar"}, {"mqar", {{"seq_len", 256}}}}), &st);
  CHECK(st.code() == Status::Code::kInvalidArgument);
  CHECK(st.message().find("mqar.seq_len") != std::string::npos);
}

TEST_CASE("tasks: mqar.updates trains that many updates past the start, whatever train.steps") {
  // A constant learning rate (no warm-up, min_lr_ratio 1) makes train.steps matter only as
  // the end: 3 updates by train.steps and 3 by mqar.updates are the same run.
  const Json constant = {{"kind", "mqar"}, {"train", {{"warmup_steps", 0}, {"min_lr_ratio", 1.0}}}};
  Json by_steps = constant, by_updates = constant;
  by_updates["train"]["steps"] = 50;
  by_updates["mqar"] = {{"updates", 3}};
  Status st;
  Json a = Summary(TaskRun("mqar_steps", by_steps), &st);
  REQUIRE(st.ok());
  Json b = Summary(TaskRun("mqar_updates", by_updates), &st);
  REQUIRE(st.ok());
  CHECK(a[metric::kMqarTrainLoss] == b[metric::kMqarTrainLoss]);
  CHECK(a[metric::kMqarLoss] == b[metric::kMqarLoss]);
}

TEST_CASE("tasks: passkey reports exact-match accuracy per length x depth cell") {
  Status st;
  Json s =
      Summary(TaskRun("pk", {{"kind", "passkey"}, {"passkey", {{"depths", "0.25,0.75"}}}}), &st);
  INFO(st.message());
  REQUIRE(st.ok());
  CHECK(s.contains("passkey.acc.L160.D25"));
  CHECK(s.contains("passkey.acc.L160.D75"));
  CHECK(s[metric::kPasskeyAccuracy].get<double>() >= 0);
  CHECK(s[metric::kPasskeyAccuracy].get<double>() <= 1);
  Summary(TaskRun("pk_long", {{"kind", "passkey"}, {"passkey", {{"lengths", "64"}}}}), &st);
  CHECK(st.code() == Status::Code::kInvalidArgument);
  Summary(TaskRun("pk_ctx", {{"kind", "passkey"}, {"passkey", {{"lengths", "190"}}}}), &st);
  CHECK(st.code() == Status::Code::kInvalidArgument);
  CHECK(st.message().find("passkey.lengths") != std::string::npos);
  // The lists parse as every other list key does (common/config_key.h).
  Summary(TaskRun("pk_depth", {{"kind", "passkey"}, {"passkey", {{"depths", "0.5,1.5"}}}}), &st);
  CHECK(st.message().find("passkey.depths") != std::string::npos);
  CHECK(st.message().find("numbers in [0, 1]") != std::string::npos);
  Summary(TaskRun("pk_neg", {{"kind", "passkey"}, {"passkey", {{"lengths", "-160"}}}}), &st);
  CHECK(st.message().find("positive integers") != std::string::npos);
}

}  // namespace headlab
