#include "common/search.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>

namespace headlab {
namespace {

StatusOr<SearchSpec> Parse(const std::string& search) {
  return ParseSearch(Json::parse("{\"search\": " + search + "}"), "g.jsonc");
}

std::string ErrorOf(const std::string& search) {
  auto s = Parse(search);
  return s.ok() ? "" : s.status().message();
}

TEST_CASE("search: the space parses; bad parts are named") {
  auto s = Parse(R"({"samples": 5, "seed": 7, "space": {
      "train.lr": {"log_uniform": [1e-4, 1e-2]}, "train.warmup_steps": {"uniform": [0, 40]},
      "model.norm": {"choice": ["layernorm", "rmsnorm"]}},
      "early_stop": {"rule": "median", "metric": "train.loss", "min_step": 20}})");
  REQUIRE(s.ok());
  CHECK(s->samples == 5);
  CHECK(s->seed == 7);
  REQUIRE(s->dims.size() == 3);
  CHECK(s->dims[0].key == "model.norm");
  CHECK(s->dims[1].key == "train.lr");
  CHECK_FALSE(s->dims[1].integer);
  CHECK(s->dims[2].integer);
  REQUIRE(s->early_stop);
  CHECK(s->early_stop->metric == "train.loss");
  CHECK(s->early_stop->min_step == 20);
  CHECK(s->early_stop->min_completed == 3);
  CHECK(ParseSearch(Json::object(), "g")->samples == 0);

  CHECK(ErrorOf(R"({"samples": 0, "space": {"seed": {"uniform": [1, 9]}}})") ==
        "g.jsonc: $.search.samples: expected the sample budget, an integer in [1, 100000], got 0");
  CHECK(ErrorOf(R"({"samples": 2, "space": {"train.lr": {"log_uniform": [0, 1]}}})") ==
        "g.jsonc: $.search.space.train.lr.log_uniform: expected LO > 0, got 0");
  CHECK(ErrorOf(R"({"samples": 2, "space": {"train.lr": {"uniform": [0.1, 5]}}})") ==
        "g.jsonc: $.search.space.train.lr.uniform[1]: expected a number in (0, 1], got 5");
  CHECK(ErrorOf(R"({"samples": 2, "space": {"train.lr": {"uniform": [0.1, 0.01]}}})")
            .find("expected [LO, HI] with LO < HI") != std::string::npos);
  CHECK(
      ErrorOf(R"({"samples": 2, "space": {"model.norm": {"choice": ["layernorm", "batchnorm"]}}})")
          .find("$.search.space.model.norm.choice[1]: expected one of") != std::string::npos);
  CHECK(ErrorOf(R"({"samples": 2, "space": {"train.lrr": {"uniform": [0.1, 0.2]}}})")
            .find("did you mean \"train.lr\"") != std::string::npos);
  CHECK(ErrorOf(R"({"samples": 2, "space": {"train.lr": {"normal": [0.1, 0.2]}}})")
            .find("expected {\"uniform\": [LO, HI]}") != std::string::npos);
  CHECK(ErrorOf(R"({"samples": 2, "space": {"train.lr": {"uniform": [0.1, 0.2]}},
                   "early_stop": {"rule": "asha", "metric": "train.loss"}})") ==
        "g.jsonc: $.search.early_stop.rule: expected \"median\" (the median stopping rule), got "
        "\"asha\"");
  // Every problem at once.
  CHECK(ErrorOf(R"({"samples": -1, "bogus": 1, "space": {}})").rfind("g.jsonc: 3 problems:", 0) ==
        0);
}

TEST_CASE("search: draws are deterministic, in range and distributed as asked") {
  auto s = Parse(R"({"samples": 20000, "seed": 3, "space": {
      "train.lr": {"log_uniform": [1e-4, 1e-2]}, "train.warmup_steps": {"uniform": [0, 40]},
      "model.norm": {"choice": ["layernorm", "rmsnorm"]}}})");
  REQUIRE(s.ok());
  std::vector<Json> a = DrawSamples(*s), b = DrawSamples(*s);
  REQUIRE(a.size() == 20000);
  CHECK(a == b);
  SearchSpec other = *s;
  other.seed = 4;
  CHECK(DrawSamples(other) != a);
  double log_sum = 0, warm_sum = 0;
  std::map<std::string, int> norms;
  for (const Json& p : a) {
    const double lr = p["train.lr"].get<double>();
    REQUIRE(lr >= 1e-4);
    REQUIRE(lr <= 1e-2);
    log_sum += std::log10(lr);
    REQUIRE(p["train.warmup_steps"].is_number_integer());
    const int64_t w = p["train.warmup_steps"].get<int64_t>();
    REQUIRE((w >= 0 && w <= 40));
    warm_sum += double(w);
    ++norms[p["model.norm"].get<std::string>()];
  }
  // log10 of a log-uniform draw on [1e-4, 1e-2] is uniform on [-4, -2]: mean -3, sd
  // 2/sqrt(12) = 0.577, so the mean of 20000 is within 4 SE (0.016) of -3.
  CHECK(log_sum / 20000 == Approx(-3.0).margin(0.017));
  // Rounded uniform on [0, 40]: mean 20, sd 11.5, 4 SE = 0.33.
  CHECK(warm_sum / 20000 == Approx(20.0).margin(0.33));
  // Each of two choices: p = 0.5, sd of the count sqrt(20000 / 4) = 71, 4 SD = 283.
  CHECK(norms["layernorm"] == Approx(10000).margin(283));
  CHECK(norms["rmsnorm"] == Approx(10000).margin(283));
}

// Median stopping rule (Vizier §3.2.2), on hand-computed numbers.
TEST_CASE("median stopping: the best so far against the median of running averages") {
  EarlyStop rule;
  rule.metric = "train.loss";
  rule.min_step = 2;
  rule.min_completed = 3;
  // Completed runs' losses at steps 1..3; running averages up to step 2: 4.5, 3.5, 2.5
  // (median 3.5); up to step 3: 4, 3, 2 (median 3).
  const std::vector<std::vector<StepValue>> done = {
      {{1, 5}, {2, 4}, {3, 3}}, {{1, 4}, {2, 3}, {3, 2}}, {{1, 3}, {2, 2}, {3, 1}}};
  // Best 3.6 by step 2 > 3.5: stop.
  auto stop = MedianStoppingReason(rule, {{1, 3.9}, {2, 3.6}}, done, true);
  REQUIRE(stop);
  CHECK(*stop ==
        "early stop (median rule): train.loss best 3.6 by step 2 is worse than the "
        "median 3.5 of 3 completed runs' running averages");
  CHECK_FALSE(MedianStoppingReason(rule, {{1, 3.9}, {2, 3.4}}, done, true));  // 3.4 < 3.5
  CHECK_FALSE(MedianStoppingReason(rule, {{1, 9}}, done, true));              // before min_step
  CHECK_FALSE(
      MedianStoppingReason(rule, {{1, 9}, {2, 9}}, {done[0], done[1]}, true));  // 2 < 3 completed
  // Higher is better (an accuracy): best 3.4 < median 3.5 stops.
  CHECK(MedianStoppingReason(rule, {{1, 3.0}, {2, 3.4}}, done, false));
  CHECK_FALSE(MedianStoppingReason(rule, {{1, 3.0}, {2, 3.6}}, done, false));
  // Step 3: median 3; best 2.9 continues.
  CHECK_FALSE(MedianStoppingReason(rule, {{1, 5}, {2, 4}, {3, 2.9}}, done, true));
}

}  // namespace
}  // namespace headlab
