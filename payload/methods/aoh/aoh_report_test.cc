#include "payload/methods/aoh/aoh_report.h"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <sstream>

#include "common/files.h"
#include "common/sha256.h"
#include "payload/methods/aoh/aoh_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aoh {
namespace {

// Reads the events written to `f` as JSON objects.
std::vector<Json> Events(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::vector<Json> out;
  char line[1 << 16];
  while (std::fgets(line, sizeof(line), f)) out.push_back(Json::parse(line));
  return out;
}

TEST_CASE("aoh report: convert + evaluate emit metrics, summary and hashed artifacts") {
  torch::manual_seed(41);
  ModelConfig m = TinyModelConfig("rope", 4, 2, 200);
  m.vocab = 256;
  Gpt model(m);
  AohRunConfig cfg;
  cfg.enabled = true;
  cfg.options.sink = 4;
  cfg.options.recent = 16;
  cfg.options.rope_max_distance = 64;  // aoh_rope
  cfg.prefill_chunk = 32;
  cfg.passkey_lengths = {150};
  cfg.passkey_depths = {0.5};
  cfg.passkey_samples = 2;
  cfg.bench_contexts = {32};
  cfg.bench_decode_tokens = 2;
  cfg.bench_repeats = 1;
  FILE* f = std::tmpfile();
  EventSink events(f);
  auto plan = ConvertAndReport(*model, cfg, 7, &events);
  REQUIRE(plan.ok());
  const std::string dir = "/tmp/aoh_report_test_" + std::to_string(::getpid());
  torch::Tensor windows = torch::randint(0, 256, {3, 41}, torch::kLong);
  auto summary = EvaluateAndReport(*model, cfg, &plan.value(), windows, 2, 1, 9, dir, &events);
  REQUIRE(summary.ok());
  CHECK((*summary)["aoh.retrieval_heads"] == 4);  // 1 of 2 KV groups x 2 query heads x 2 layers
  CHECK((*summary)["aoh.ppl"].get<double>() > 1);
  CHECK((*summary)["aoh.bench.context"] == 32);
  CHECK(summary->contains("aoh.rope_spearman"));
  CHECK(summary->contains("aoh.passkey_acc"));
  std::map<std::string, int> metrics, artifacts;
  for (const Json& e : Events(f)) {
    if (e["ev"] == "metric") ++metrics[e["key"].get<std::string>()];
    if (e["ev"] == "artifact") {
      ++artifacts[e["kind"].get<std::string>()];
      auto text = ReadFile(e["path"].get<std::string>());
      REQUIRE(text.ok());
      CHECK(Sha256Hex(text.value()) == e["sha256"]);
    }
  }
  CHECK(metrics["aoh.retrieval_heads"] == 1);
  CHECK(metrics["aoh.ppl"] == 1);
  CHECK(metrics.count("eval.ppl") == 0);  // the loop reports eval.ppl itself
  CHECK(metrics["aoh.bench.prefill_s"] == 1);
  CHECK(metrics["aoh.rope_spearman"] == 2);  // one per layer
  CHECK(artifacts["aoh_head_maps"] == 1);
  CHECK(artifacts["aoh_passkey"] == 1);
  CHECK(artifacts["aoh_bench"] == 1);
  auto maps = ReadFile(dir + "/aoh_head_maps.json");
  REQUIRE(maps.ok());
  CHECK(ParseJson(maps.value(), "maps").value().size() == 8);
  std::fclose(f);

  // The saved head map re-installs exactly the planned states.
  std::vector<std::vector<HeadState>> planned = {model->attention(0)->head_states(),
                                                 model->attention(1)->head_states()};
  AohOptions all_retrieval;
  all_retrieval.sparsity = 0;
  ApplyPlan(*model, PlanAoh(*model, all_retrieval).value());
  REQUIRE(ApplyHeadMaps(*model, ParseJson(maps.value(), "maps").value()).ok());
  for (int64_t l = 0; l < 2; ++l)
    for (size_t h = 0; h < 4; ++h) {
      CHECK(model->attention(l)->head_states()[h].mode == planned[size_t(l)][h].mode);
      CHECK(model->attention(l)->head_states()[h].recent == planned[size_t(l)][h].recent);
      CHECK(model->attention(l)->head_states()[h].sink == planned[size_t(l)][h].sink);
    }
  CHECK_FALSE(
      ApplyHeadMaps(*model,
                    ParseJson(R"([{"layer": 5, "head": 0, "role": "retrieval"}])", "m").value())
          .ok());
  CHECK_FALSE(
      ApplyHeadMaps(*model, ParseJson(R"([{"layer": 0, "head": 0, "role": "local"}])", "m").value())
          .ok());

  // Full attention (no plan): every head counts as retrieval, no head map.
  FILE* g = std::tmpfile();
  EventSink full_events(g);
  AohRunConfig none;
  ApplyPlan(*model, PlanAoh(*model, all_retrieval).value());
  auto full = EvaluateAndReport(*model, none, nullptr, windows, 2, 1, 9, dir, &full_events);
  REQUIRE(full.ok());
  CHECK((*full)["aoh.retrieval_heads"] == 8);
  std::fclose(g);
}

TEST_CASE("aoh report: a plan survives its JSON form; bad JSON is refused by field") {
  torch::manual_seed(43);
  Gpt model(TinyModelConfig("rope", 4, 2));
  AohOptions o;
  o.sparsity = 0.5;
  auto plan = PlanAoh(*model, o);
  REQUIRE(plan.ok());
  // Through text, as the checkpoint stores it.
  auto back = PlanFromJson(ParseJson(PlanJson(*plan).dump(), "p").value(), o, *model);
  REQUIRE(back.ok());
  CHECK((back->head_roles == plan->head_roles));
  CHECK((back->group_roles == plan->group_roles));
  CHECK(back->group_scores == plan->group_scores);
  REQUIRE(back->head_scores.size() == plan->head_scores.size());
  CHECK(back->head_scores[1][3].effective_rank == plan->head_scores[1][3].effective_rank);
  CHECK(back->head_scores[1][3].stable_rank == plan->head_scores[1][3].stable_rank);
  CHECK(back->options.sparsity == 0.5);

  Json bad = PlanJson(*plan);
  bad["head_roles"][0][1] = "local";
  auto st = PlanFromJson(bad, o, *model);
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().message().find("head_roles") != std::string::npos);
  Gpt other(TinyModelConfig("rope", 4, 2, 24, 3));  // 3 layers
  CHECK_FALSE(PlanFromJson(PlanJson(*plan), o, *other).ok());
}

}  // namespace
}  // namespace headlab::aoh
