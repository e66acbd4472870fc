#include "payload/exec/run_setup.h"

#include <string>

#include "common/files.h"
#include "common/run_config.h"
#include "common/sha256.h"
#include "payload/exec/attention.h"
#include "payload/exec/attention_cuda.h"
#include "payload/exec/event_capture.h"
#include "payload/exec/model_testing.h"
#include "payload/exec/optimizer.h"
#include "payload/exec/test_util.h"
#include "payload/exec/train.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

ExecConfig TinyConfig(const Json& overrides) {
  Json config = {
      {"kind", "train"},
      {"seed", 5},
      {"data", {{"source", "builtin"}}},
      {"model", {{"layers", 1}, {"heads", 2}, {"width", 16}, {"context", 16}, {"vocab", 256}}},
      {"train", {{"threads", 1}, {"device", "cpu"}, {"batch_size", 2}}}};
  config.merge_patch(overrides);
  StatusOr<Json> normalized = NormalizeRunConfig(config, "test");
  INFO(normalized.status().message());
  REQUIRE(normalized.ok());
  StatusOr<ExecConfig> c = ExecConfigFromJson(*normalized, "test");
  REQUIRE(c.ok());
  return *c;
}

std::vector<float> Flat(Gpt& model) {
  std::vector<float> out;
  for (const torch::Tensor& p : model->parameters()) {
    torch::Tensor f = p.detach().to(torch::kFloat).contiguous().view({-1});
    out.insert(out.end(), f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
  }
  return out;
}

// Provenance of train.attention = auto's measured choice: every layer's candidates and the
// one chosen, from a CPU model on the fast path's stand-ins with a deterministic timer.
TEST_CASE("run setup: attention_choices records every layer's candidates and the fastest") {
  torch::manual_seed(7);
  Gpt model(testing::TinyModelConfig(2, 2, 128, 16, 40));  // head_dim 64
  torch::Tensor alpha = torch::randn({16}) * 0.5, rho = torch::randn({16}) * 0.3;
  model->attention(1)->SetFixedCompact(1, alpha, rho, CompactLogNormalizer(alpha, rho));
  // Time = the label's length.
  SetPlanTimerForTesting([](const std::string& label, const std::function<void()>& run) {
    run();
    return double(label.size());
  });
  SetFastPathOnCpuForTesting(true);
  torch::Tensor x = torch::randint(0, 40, {2, 16}, torch::kLong);
  model->Loss(x, x).backward();
  SetFastPathOnCpuForTesting(false);
  SetPlanTimerForTesting(PlanTimer());
  // Layer 0 has no fixed head: its static plan, untimed. Layer 1's static plan (the GEMM, 21)
  // ties with the convolution and beats the kernels: it stays.
  CHECK(AttentionChoices(model) == Json::parse(R"([
    {"layer": 1, "shape": "B=2 T=16 Float fwd+bwd", "chosen": "sdpa[1] fixed_gemm[1]",
     "candidates_ms": {"fused[1] fixed_fused[1]": 23, "sdpa[1] fixed_gemm[1]": 21,
                       "sdpa[1] fixed_conv[1]": 21, "sdpa[1] fixed_fused[1]": 22},
     "samples_ms": {"fused[1] fixed_fused[1]": [23, 23, 23, 23, 23],
                    "sdpa[1] fixed_gemm[1]": [21, 21, 21, 21, 21],
                    "sdpa[1] fixed_conv[1]": [21, 21, 21, 21, 21],
                    "sdpa[1] fixed_fused[1]": [22, 22, 22, 22, 22]}}])"));
  CHECK(AttentionPaths(model) == Json::parse(R"({"sdpa[2]": [0], "sdpa[1] fixed_gemm[1]": [1]})"));
}

}  // namespace

TEST_CASE("run setup: device by rank and threads") {
  ExecConfig c = TinyConfig(Json::object());
  torch::Device device(torch::kCUDA, 0);
  REQUIRE(PickDevice(c.train, 0, &device).ok());
  CHECK(device == torch::Device(torch::kCPU));
  CHECK(torch::get_num_threads() == 1);
  if (!torch::cuda::is_available()) {
    c.train.device = "cuda";
    Status s = PickDevice(c.train, 0, &device);
    CHECK(s.code() == Status::Code::kUnavailable);
    CHECK(s.message() == "train.device is \"cuda\" but no CUDA device is available");
  }
}

TEST_CASE("run setup: the seed alone decides the initial weights") {
  StatusOr<Gpt> a = SeededModel(TinyConfig(Json::object()), nullptr);
  StatusOr<Gpt> b = SeededModel(TinyConfig(Json::object()), nullptr);
  StatusOr<Gpt> other = SeededModel(TinyConfig({{"seed", 6}}), nullptr);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(other.ok());
  CHECK(Flat(*a) == Flat(*b));
  CHECK(Flat(*a) != Flat(*other));
}

TEST_CASE("run setup: data checks name the config field") {
  StatusOr<Dataset> ok = LoadRunData(TinyConfig(Json::object()));
  REQUIRE(ok.ok());
  CHECK(ok->vocab == 256);
  CHECK(ok->train.size > 16);
  Json prov = DataProvenance(*ok, TinyConfig(Json::object()));
  CHECK(prov["dataset_source"] == "builtin");
  CHECK(prov["dataset_sha256"] == ok->sha256);
  CHECK(prov["dataset_train_tokens"] == ok->train.size);

  ExecConfig small = TinyConfig(Json::object());
  small.model.vocab = 100;  // the schema refuses it for builtin data; LoadRunData must too
  StatusOr<Dataset> small_vocab = LoadRunData(small);
  REQUIRE(!small_vocab.ok());
  CHECK(small_vocab.status().message() ==
        "config: $.config.model.vocab: the builtin data set needs vocab >= 256, got 100");
}

TEST_CASE("run setup: a saved checkpoint is restored only with the manifest's SHA-256 and step") {
  ExecConfig c = TinyConfig(Json::object());
  StatusOr<Gpt> saved_model = SeededModel(c, nullptr);
  REQUIRE(saved_model.ok());
  Gpt saved = *saved_model;
  auto saved_opt = MakeOptimizer(saved, c.train);
  TrainProgress at3;
  at3.step = 3;
  const std::string dir = testing::ScratchPath("headlab_run_setup_test");
  testing::RemoveTree(dir);
  REQUIRE(MakeDirs(dir).ok());
  Status saved_st;
  std::vector<Json> events = testing::CaptureEvents(
      [&](EventSink* sink) {
        return SaveCheckpoint(dir, Json::object(), saved, *saved_opt, at3, sink);
      },
      &saved_st);
  REQUIRE(saved_st.ok());
  const std::string path = CheckpointPath(dir, 3);
  StatusOr<std::string> read = ReadFile(path);
  REQUIRE(read.ok());
  const std::string bytes = *read;
  CHECK(bytes == SerializeCheckpoint(saved, *saved_opt, at3, CanonicalJson(Json::object())));
  REQUIRE(events.size() == 1);  // the artifact, naming the file and its hash
  CHECK(events[0]["ev"] == "artifact");
  CHECK(events[0]["kind"] == "checkpoint");
  CHECK(events[0]["path"] == path);
  CHECK(events[0]["sha256"] == Sha256Hex(bytes));

  StatusOr<Gpt> fresh = SeededModel(TinyConfig({{"seed", 9}}), nullptr);
  REQUIRE(fresh.ok());
  Gpt model = *fresh;
  auto opt = MakeOptimizer(model, c.train);
  TrainProgress progress;
  Status wrong_sha =
      RestoreStartCheckpoint({path, std::string(64, '0'), 3}, model, *opt, &progress);
  CHECK(wrong_sha.code() == Status::Code::kCorruption);
  CHECK(wrong_sha.message() == path + ": SHA-256 is " + Sha256Hex(bytes) +
                                   ", the manifest expects " + std::string(64, '0'));
  Status wrong_step = RestoreStartCheckpoint({path, Sha256Hex(bytes), 4}, model, *opt, &progress);
  CHECK(wrong_step.code() == Status::Code::kCorruption);
  CHECK(wrong_step.message() == path + ": holds step 3, the manifest expects 4");

  REQUIRE(RestoreStartCheckpoint({path, Sha256Hex(bytes), 3}, model, *opt, &progress).ok());
  CHECK(progress.step == 3);
  CHECK(Flat(model) == Flat(saved));
  testing::RemoveTree(dir);
}

TEST_CASE("run setup: provenance names libtorch, device, threads and the execution") {
  ExecConfig c = TinyConfig(Json::object());
  StatusOr<Gpt> model = SeededModel(c, nullptr);
  REQUIRE(model.ok());
  Gpt m = *model;
  torch::Device cpu(torch::kCPU);
  REQUIRE(PlaceModel(m, c.train, cpu).ok());
  Json prov = RunProvenance(m, cpu);
  CHECK(prov["device"] == "cpu");
  CHECK(prov["threads"] == torch::get_num_threads());
  CHECK(prov["precision"] == "fp32");  // train.precision auto on the CPU
  CHECK(prov.contains("libtorch_version"));
  CHECK(prov.contains("attention_backend"));
}

}  // namespace headlab
