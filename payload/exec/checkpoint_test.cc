// The checkpoint-size closed forms (common/checkpoint_size.h) against real models and real
// serialized checkpoints: the worker's disk check sizes runs by them.
#include "payload/exec/checkpoint.h"

#include "common/checkpoint_size.h"
#include "common/run_config.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/optimizer.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("checkpoint size: the closed forms match the model's parameters and the archive") {
  for (const char* text : {
           R"({})",
           R"({"model": {"layers": 3, "heads": 3, "width": 96, "context": 48, "vocab": 300,
                         "mlp_ratio": 3, "pos": "rope", "norm": "rmsnorm"}})",
           R"({"model": {"layers": 2, "heads": 8, "kv_heads": 2, "width": 256, "context": 256,
                         "vocab": 512}})",
       }) {
    INFO(text);
    StatusOr<Json> config = NormalizeRunConfig(Json::parse(text), "test");
    REQUIRE(config.ok());
    StatusOr<ExecConfig> c = ExecConfigFromJson(*config, "test");
    REQUIRE(c.ok());
    Gpt model(c->model);
    int64_t numel = 0;
    for (const torch::Tensor& p : model->parameters()) numel += p.numel();
    CHECK(ModelParameterCount(*config) == numel);

    // One update, so that AdamW holds both moments of every parameter.
    auto opt = MakeOptimizer(model, c->train);
    torch::Tensor loss = torch::zeros({});
    for (const torch::Tensor& p : model->parameters()) loss = loss + p.sum();
    loss.backward();
    opt->step();
    TrainProgress progress;
    progress.step = 1;
    const std::string bytes = SerializeCheckpoint(model, *opt, progress, "{}");
    const int64_t estimate = CheckpointBytesEstimate(*config);
    // The estimate counts the tensors' bytes; the archive adds names and records, which the
    // worker's 10% margin (worker/disk_check.h) must cover.
    CHECK(int64_t(bytes.size()) >= estimate);
    CHECK(double(bytes.size()) <= 1.10 * double(estimate));
  }
}

}  // namespace headlab
