// The AoH hooks inside the real training loop (payload/exec/train.cc) on a tiny model.

#include <cstdio>
#include <map>

#include "common/files.h"
#include "common/run_config.h"
#include "payload/exec/test_util.h"
#include "payload/exec/train.h"
#include "payload/exec/train_testing.h"
#include "payload/methods/aoh/aoh_method.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

// A tiny RoPE run (2 layers x 4 heads, context 48) with `overrides` merged in, its AoH
// hooks built by the real factory.
TrainRequest AohRun(const std::string& name, const Json& overrides) {
  Json config = {{"seed", 5},
                 {"model",
                  {{"layers", 2},
                   {"heads", 4},
                   {"width", 32},
                   {"context", 48},
                   {"pos", "rope"},
                   {"norm", "rmsnorm"}}},
                 {"train",
                  {{"threads", 1},
                   {"batch_size", 2},
                   {"warmup_steps", 1},
                   {"steps", 4},
                   {"eval_every", 0},
                   {"eval_batches", 1},
                   {"log_every", 1},
                   {"checkpoint_every", 0},
                   {"device", "cpu"}}},
                 {"aoh", {{"sink", 2}, {"recent", 8}, {"prefill_chunk", 16}}}};
  config.merge_patch(overrides);
  StatusOr<TrainRequest> req =
      testing::MakeTrainRequest(config, "t.jsonc", "headlab_aoh_hooks_" + name);
  REQUIRE(req.ok());
  return req.value();
}

using Outcome = testing::TrainEvents;
constexpr auto Train = testing::CollectTrainingEventsOk;  // the run must succeed

TEST_CASE("aoh hooks: convert during training, keep training, resume with the same labels") {
  const Json cfg = {{"aoh", {{"method", "aoh"}, {"sparsity", 0.5}, {"apply_step", 2}}},
                    {"train", {{"checkpoint_every", 3}}}};
  TrainRequest full = AohRun("during", cfg);
  Outcome a = Train(full);
  CHECK(a.metrics["aoh.retrieval_heads"].count(2) == 1);  // converted before update 3
  CHECK(a.metrics["aoh.retrieval_heads"].at(2) == 4);     // 2 of 4 heads x 2 layers
  CHECK(a.summary["aoh.converted_at"] == 2);
  CHECK(a.summary["aoh.ppl"].get<double>() > 1);
  CHECK(a.summary["eval.ppl"].get<double>() > 1);
  CHECK(a.summary.contains("aoh.kv_bytes"));
  CHECK(a.by_kind.count("aoh_head_maps") == 1);
  // The decoder's perplexity (chunked prefill, eviction) and the loop's masked forward
  // read the same tokens with the same head states.
  CHECK(a.summary["aoh.ppl"].get<double>() ==
        Approx(a.summary["eval.ppl"].get<double>()).epsilon(1e-4));

  // Resumed after the conversion: the labels come back from the checkpoint (not re-planned
  // from the step-3 weights) and training continues bit for bit.
  TrainRequest cont = AohRun("during_resume", cfg);
  cont.resume = a.ResumeAt(3);
  Outcome b = Train(cont);
  CHECK(b.metrics["aoh.retrieval_heads"].empty());  // no second conversion
  CHECK(b.summary["aoh.converted_at"] == 2);
  CHECK(b.metrics["train.loss"].at(4) == a.metrics["train.loss"].at(4));
  CHECK(b.summary["aoh.ppl"] == a.summary["aoh.ppl"]);
  auto maps_a = ReadFile(a.by_kind["aoh_head_maps"].back()["path"]);
  auto maps_b = ReadFile(b.by_kind["aoh_head_maps"].back()["path"]);
  REQUIRE(maps_a.ok());
  REQUIRE(maps_b.ok());
  CHECK(maps_a.value() == maps_b.value());
  for (const TrainRequest* r : {&full, &cont}) testing::RemoveTree(r->out_dir);
}

TEST_CASE(
    "aoh hooks: applied to a checkpoint by a zero-step continuation, arms differ only in AoH") {
  TrainRequest parent = AohRun("parent", {{"train", {{"checkpoint_every", 4}}}});
  REQUIRE(parent.hooks.empty());  // no aoh evaluation asked for: plain training
  Outcome p = Train(parent);
  const Json eval = {{"passkey_lengths", "100"}, {"passkey_depths", "0.5"}, {"passkey_samples", 2}};
  std::map<std::string, Outcome> arms;
  std::vector<TrainRequest> reqs;
  for (const auto& [arm, method, sparsity] :
       std::vector<std::tuple<std::string, std::string, double>>{{"full", "none", 0.5},
                                                                 {"aoh25", "aoh", 0.25},
                                                                 {"aoh75", "aoh", 0.75},
                                                                 {"reverse", "reverse", 0.75}}) {
    Json aoh = eval;
    aoh["method"] = method;
    aoh["sparsity"] = sparsity;
    reqs.push_back(AohRun("arm_" + arm, {{"aoh", aoh}}));  // train.steps 4 = the parent's
    reqs.back().parent = p.ResumeAt(4);
    REQUIRE(reqs.back().hooks.size() == 1);
    INFO("arm " << arm);
    arms[arm] = Train(reqs.back());
    CHECK(arms[arm].metrics["train.loss"].empty());  // zero updates
    CHECK(arms[arm].summary.contains("aoh.passkey_acc"));
  }
  CHECK(arms["full"].summary["aoh.retrieval_heads"] == 8);
  CHECK(arms["full"].by_kind.count("aoh_head_maps") == 0);
  CHECK(arms["aoh25"].summary["aoh.retrieval_heads"] == 6);
  CHECK(arms["aoh75"].summary["aoh.retrieval_heads"] == 2);
  CHECK(arms["aoh75"].summary["aoh.converted_at"] == 4);
  CHECK(arms["aoh75"].by_kind.count("aoh_head_maps") == 1);
  // KV bytes fall as sparsity rises (context 48 > sink 2 + recent 8).
  const double full_kv = arms["full"].summary["aoh.kv_bytes"],
               kv25 = arms["aoh25"].summary["aoh.kv_bytes"],
               kv75 = arms["aoh75"].summary["aoh.kv_bytes"];
  CHECK(full_kv > kv25);
  CHECK(kv25 > kv75);
  CHECK(arms["reverse"].summary["aoh.kv_bytes"] == kv75);  // same counts, other heads
  // Full attention through the decoder is the parent model itself.
  CHECK(arms["full"].summary["aoh.ppl"].get<double>() ==
        Approx(p.summary["eval.ppl"].get<double>()).epsilon(1e-4));
  testing::RemoveTree(parent.out_dir);
  for (const TrainRequest& r : reqs) testing::RemoveTree(r.out_dir);
}

TEST_CASE(
    "aoh hooks: bench rows label their device; AoH-RoPE reports Table 6; bad configs refused") {
  TrainRequest req = AohRun("rope", {{"train", {{"steps", 2}}},
                                     {"aoh",
                                      {{"method", "aoh_rope"},
                                       {"rope_max_distance", 16},
                                       {"bench_contexts", "16,32"},
                                       {"bench_decode_tokens", 2},
                                       {"bench_repeats", 1}}}});
  Outcome o = Train(req);
  CHECK(o.provenance["aoh_bench_device"] == "cpu (1 threads)");
  CHECK(o.summary["aoh.bench.context"] == 32);
  CHECK(o.summary["aoh.bench.prefill_s"].get<double>() > 0);
  CHECK(o.metrics["aoh.bench.decode_ms_per_token"].size() == 2);  // step = context
  CHECK(o.metrics["aoh.rope_spearman"].size() == 2);              // step = layer
  CHECK(o.summary.contains("aoh.rope_spearman"));
  CHECK(o.by_kind.count("aoh_bench") == 1);
  testing::RemoveTree(req.out_dir);

  auto make = [](const Json& overrides) {
    Json config = {{"model", {{"layers", 1}, {"heads", 2}, {"width", 16}, {"context", 16}}},
                   {"train", {{"steps", 10}}}};
    config.merge_patch(overrides);
    Json n = NormalizeRunConfig(config, "g.jsonc").value();
    return MakeAohHooks(ExecConfigFromJson(n, "g.jsonc").value(), n, "g.jsonc");
  };
  auto late = make({{"aoh", {{"method", "aoh"}, {"apply_step", 11}}}});
  REQUIRE_FALSE(late.ok());
  CHECK(late.status().code() == Status::Code::kInvalidArgument);
  CHECK(late.status().message().find("g.jsonc: $.aoh.apply_step") != std::string::npos);
  auto learned = make({{"aoh", {{"method", "aoh_rope"}}}});
  REQUIRE_FALSE(learned.ok());
  CHECK(learned.status().message().find("model.pos") != std::string::npos);
  auto bad = make({{"aoh", {{"method", "aoh"}, {"passkey_lengths", "1,x"}}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("$.aoh.passkey_lengths") != std::string::npos);
  auto off = make(Json::object());
  REQUIRE(off.ok());
  CHECK(off.value() == nullptr);
}

}  // namespace
}  // namespace headlab
