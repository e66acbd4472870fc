#include "coordinator/results.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "common/files.h"
#include "common/grid.h"
#include "common/sha256.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("mean and SE on hand-computed numbers") {
  // Ratios 0.9633, 0.6653, 1.0732: mean 0.9006; deviations 0.0627, -0.2353, 0.1726;
  // sum of squares 0.08916; sd = sqrt(0.08916 / 2) = 0.2111; SE = 0.2111 / sqrt(3) = 0.1219.
  MeanSe m = MeanAndSe({0.9633, 0.6653, 1.0732});
  CHECK(m.n == 3);
  CHECK(m.mean == Approx(0.9006).margin(5e-4));
  CHECK(m.se == Approx(0.1219).margin(5e-4));
  MeanSe two = MeanAndSe({1.0, 3.0});  // sd = sqrt(2), SE = 1
  CHECK(two.mean == 2.0);
  CHECK(two.se == Approx(1.0));
  CHECK(std::isnan(MeanAndSe({5.0}).se));
  CHECK(MeanAndSe({}).n == 0);
}

TEST_CASE("pair values") {
  CHECK(*PairValue("delta_pct", 20.0, 21.0) == Approx(5.0));
  CHECK(*PairValue("diff", 20.0, 21.0) == Approx(1.0));
  CHECK(*PairValue("ratio", 20.0, 21.0) == Approx(1.05));
  CHECK_FALSE(PairValue("ratio", 0.0, 1.0));
  CHECK_FALSE(PairValue("median", 1.0, 1.0));
}

TEST_CASE("results pair runs by pair_key and store paired_stats") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"base", "treat"}, 3), {}, false);
  REQUIRE(e.ok());
  // base ppl 10, 20, 30; treat ppl 9.633, 13.306, 32.196 -> ratios .9633 .6653 1.0732.
  const double base[] = {10, 20, 30}, treat[] = {9.633, 13.306, 32.196};
  for (int i = 0; i < 6; ++i) {
    int64_t run = e->queued[i];
    REQUIRE(s.StartAttempt({run, 1}, "w", {}, nullptr).ok());
    double v = i < 3 ? base[i] : treat[i - 3];
    s.FinishAttempt({run, 1}, "succeeded", 0, "", "",
                    {{"eval.ppl", v}, {"eval.loss", std::log(v)}});
  }
  auto r = ComputeResults(s.db(), e->experiment_id);
  REQUIRE(r.ok());
  const Json& arms = (*r)["arms"];
  REQUIRE(arms.size() == 2);
  CHECK(arms[0]["arm"] == "base");
  CHECK(arms[0]["n"] == 3);
  CHECK(arms[0]["succeeded"] == 3);
  CHECK(arms[0]["metrics"]["eval.ppl"]["mean"].get<double>() == Approx(20.0));
  CHECK(arms[0]["metrics"]["eval.ppl"]["se"].get<double>() == Approx(10.0 / std::sqrt(3.0)));
  const Json& c = (*r)["comparisons"][0];
  CHECK(c["n"] == 3);
  CHECK(c["mean"].get<double>() == Approx(0.9006).margin(5e-4));
  CHECK(c["se"].get<double>() == Approx(0.1219).margin(5e-4));
  CHECK(c["per_pair"].size() == 3);
  REQUIRE(SavePairedStats(s.db(), e->experiment_id, *r).ok());
  Stmt q = s.db()->MustPrepare("SELECT n, mean, se, estimator FROM paired_stats");
  REQUIRE(q.Step());
  CHECK(q.Int(0) == 3);
  CHECK(q.Real(1) == Approx(0.9006).margin(5e-4));
  CHECK(q.Text(3) == kPairedEstimator);
  CHECK(ComputeResults(s.db(), 999).status().code() == Status::Code::kNotFound);
}

}  // namespace headlab::coord

namespace headlab::coord {
namespace {

// Reference a, method b and zero-replacement control c, reps 0..3 paired by rep: the legs
// of one paired timing group.
constexpr const char* kTimingGrid = R"({
  "name": "timing", "base": {"kind": "noop", "pair.group": "g"},
  "axes": {"pair.rep": [0, 1, 2, 3]},
  "arms": {"a": {}, "b": {"noop.metrics": 1}, "c": {"pair.control": 1}},
  "pair_by": ["pair.rep"],
  "comparisons": [{"name": "speedup", "baseline": "a", "treatment": "b",
                   "metric": "bench.update_ms", "stat": "speedup"}]})";

void FinishWith(Store& s, int64_t run, int64_t exp, double ms, const std::string& device) {
  REQUIRE(s.StartAttempt({run, 1}, "w", {0}, nullptr, exp).ok());
  REQUIRE(s.UpsertProvenance({run, 1}, {{"device", device},
                                        {"flops.status", "unmeasured"},
                                        {"flops.reason", "no CUDA device"}})
              .ok());
  s.FinishAttempt({run, 1}, "succeeded", 0, "", "", {{"bench.update_ms", ms}});
}

}  // namespace

TEST_CASE("paired timing: median speedup, range, device, control and contention") {
  for (double control_ms : {10.2, 13.0}) {
    TempDir dir;
    Store s;
    REQUIRE(s.Open(dir.path() + "/h.db").ok());
    auto grid = ExpandGrid(kTimingGrid, "timing.jsonc", {});
    REQUIRE(grid.ok());
    auto e = s.InsertExperiment(*grid, {}, false);
    REQUIRE(e.ok());
    const int64_t exp = e->experiment_id;
    // Runs: a rep 0..3, b rep 0..3, c rep 0..3. a = 10 ms; b = 8, 5, 10, 4 ms -> speedups
    // 1.25, 2, 1, 2.5: median 1.625, range [1, 2.5]; ratio of means 40 / 27.
    const double b_ms[] = {8, 5, 10, 4};
    for (int i = 0; i < 4; ++i) {
      FinishWith(s, e->queued[i], exp, 10.0, "cuda:0 H200");
      FinishWith(s, e->queued[4 + i], exp, b_ms[i], "cuda:0 H200");
      FinishWith(s, e->queued[8 + i], exp, control_ms, "cuda:0 H200");
    }
    auto r = ComputeResults(s.db(), exp);
    REQUIRE(r.ok());
    const Json& c = (*r)["comparisons"][0];
    CHECK(c["estimator"] == paired::kMedian);
    CHECK(c["n"] == 4);
    CHECK(c["value"].get<double>() == Approx(1.625));
    CHECK(c["spread"]["lo"].get<double>() == Approx(1.0));
    CHECK(c["spread"]["hi"].get<double>() == Approx(2.5));
    CHECK(c["ratio_of_means"].get<double>() == Approx(40.0 / 27.0));
    CHECK(c["device"] == "cuda:0 H200");
    CHECK(c["control"]["arm"] == "c");
    // The control's speedup a / c: 10 / 10.2 = 0.98 is within 5%; 10 / 13 is not.
    CHECK(c["contended"] == (control_ms > 11));
    CHECK(c["flops"]["flops.total_ratio"] == "unmeasured");
    CHECK(c["flops"]["reason"] == "no CUDA device");
    REQUIRE(SavePairedStats(s.db(), exp, *r).ok());
    Stmt q = s.db()->MustPrepare("SELECT estimator, value, device, details_json FROM paired_stats");
    REQUIRE(q.Step());
    CHECK(q.Text(0) == paired::kMedian);
    CHECK(q.Real(1) == Approx(1.625));
    CHECK(q.Text(2) == "cuda:0 H200");
    auto details = ParseJson(q.Text(3), "details");
    REQUIRE(details.ok());
    CHECK((*details)["contended"] == (control_ms > 11));
  }
}

TEST_CASE("eval comparisons carry a bootstrap CI of paired per-token log-prob differences") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto grid = ExpandGrid(R"({"name": "lp", "base": {"kind": "noop", "model.context": 8},
      "axes": {"seed": [1, 2]}, "arms": {"base": {}, "treat": {"noop.metrics": 1}},
      "comparisons": [{"name": "ppl", "baseline": "base", "treatment": "treat",
                       "metric": "eval.ppl", "stat": "delta_pct"}]})",
                         "lp.jsonc", {});
  REQUIRE(grid.ok());
  auto e = s.InsertExperiment(*grid, {}, false);
  REQUIRE(e.ok());
  // Two rows of 8 tokens per run. Baseline log p = -2 everywhere; the treatment adds
  // 0.5, 0.1 (seed 1) and 0.3, 0.3 (seed 2) per row: row means 0.5 0.1 0.3 0.3.
  const float add[2][2] = {{0.5f, 0.1f}, {0.3f, 0.3f}};
  for (int i = 0; i < 4; ++i) {
    const int64_t run = e->queued[i];
    std::string bytes;
    for (int row = 0; row < 2; ++row)
      for (int k = 0; k < 8; ++k) {
        float v = -2.0f + (i >= 2 ? add[i - 2][row] : 0.0f);
        bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
      }
    const std::string path = dir.path() + "/lp" + std::to_string(i) + ".f32";
    REQUIRE(WriteFileAtomic(path, bytes).ok());
    REQUIRE(s.StartAttempt({run, 1}, "w", {}, nullptr).ok());
    REQUIRE(
        s.InsertArtifact({run, 1}, 0, "logprobs", path, Sha256Hex(bytes), int64_t(bytes.size()), 5)
            .ok());
    s.FinishAttempt({run, 1}, "succeeded", 0, "", "", {{"eval.ppl", 10.0 + i}});
  }
  auto r = ComputeResults(s.db(), e->experiment_id);
  REQUIRE(r.ok());
  const Json& lp = (*r)["comparisons"][0]["logprob_diff"];
  INFO(lp.dump());
  CHECK(lp["estimator"] == paired::kBootstrap);
  CHECK(lp["n_pairs"] == 2);
  CHECK(lp["n_rows"] == 4);
  CHECK(lp["mean"].get<double>() == Approx(0.3));
  CHECK(lp["lo"].get<double>() >= 0.1 - 1e-6);
  CHECK(lp["hi"].get<double>() <= 0.5 + 1e-6);
  CHECK(lp["lo"].get<double>() < 0.3);
  CHECK(lp["per_pair"][0]["mean"].get<double>() == Approx(0.3));
  CHECK(lp["per_pair"][1]["lo"].get<double>() == Approx(0.3));  // no spread in seed 2
  auto again = ComputeResults(s.db(), e->experiment_id);        // deterministic
  CHECK((*again)["comparisons"][0]["logprob_diff"] == lp);
  CHECK((*r)["comparisons"][0]["estimator"] == paired::kMeanSe);  // not timing legs
  CHECK((*r)["comparisons"][0]["device"] == "unknown");
  // A tampered artifact is reported, not used.
  REQUIRE(WriteFileAtomic(dir.path() + "/lp0.f32", std::string(64, '\0')).ok());
  auto bad = ComputeResults(s.db(), e->experiment_id);
  CHECK((*bad)["comparisons"][0]["logprob_diff"]["unavailable"].get<std::string>().find(
            "SHA-256") != std::string::npos);
}

}  // namespace headlab::coord

namespace headlab::coord {

// Every comparison says its unit, which side is better, its 95% CI and what the CI says
// (schema/http_api.md, "Reading a comparison"); with no pairs, why. A mean ± SE alone
// was not enough.
TEST_CASE("comparisons carry unit, direction, 95% CI, verdict and a note") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  Grid g = TestGrid({"base", "treat"}, 2);
  g.comparisons = {{"dppl", "base", "treat", "eval.ppl", "delta_pct"},
                   {"typo", "base", "treat", "eval.pplx", "delta_pct"}};
  auto e = s.InsertExperiment(g, {}, false);
  REQUIRE(e.ok());
  const double ppl[] = {20.0, 30.0, 19.0, 27.0};  // delta_pct per seed: -5, -10
  for (int i = 0; i < 4; ++i) {
    REQUIRE(s.StartAttempt({e->queued[i], 1}, "w", {}, nullptr).ok());
    s.FinishAttempt({e->queued[i], 1}, "succeeded", 0, "", "", {{"eval.ppl", ppl[i]}});
  }
  auto r = ComputeResults(s.db(), e->experiment_id);
  REQUIRE(r.ok());
  const Json& c = (*r)["comparisons"][0];
  CHECK(c["unit"] == "%");
  CHECK(c["better"] == "lower");
  CHECK(c["mean"].get<double>() == Approx(-7.5));
  CHECK(c["se"].get<double>() == Approx(2.5));  // sd sqrt(12.5), / sqrt(2)
  // t(0.975; 1) = tan(0.475 pi) = 12.7062047 (df 1 is the Cauchy distribution).
  CHECK(c["ci95"]["lo"].get<double>() == Approx(-7.5 - 12.7062047 * 2.5));
  CHECK(c["ci95"]["hi"].get<double>() == Approx(-7.5 + 12.7062047 * 2.5));
  CHECK(c["ci95"]["df"] == 1);
  CHECK(c["verdict"] == "no clear difference (95% CI includes 0)");
  const Json& typo = (*r)["comparisons"][1];
  CHECK(typo["n"] == 0);
  CHECK(typo["verdict"].is_null());
  CHECK(typo["note"] ==
        "no succeeded run of arm \"base\" reports eval.pplx (did you mean "
        "\"eval.ppl\"?) (1 summary metrics reported)");
}

TEST_CASE("a verdict reads the direction of the metric and of the stat") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  Grid g = TestGrid({"base", "treat"}, 3);
  g.comparisons = {{"loss", "base", "treat", "eval.loss", "diff"},
                   {"speed", "base", "treat", "bench.update_ms", "speedup"},
                   {"acc", "base", "treat", "mqar.accuracy", "diff"}};
  auto e = s.InsertExperiment(g, {}, false);
  REQUIRE(e.ok());
  for (int i = 0; i < 6; ++i) {
    const bool t = i >= 3;
    const double k = 1.0 + 0.01 * (i % 3);
    REQUIRE(s.StartAttempt({e->queued[i], 1}, "w", {}, nullptr).ok());
    // The treatment: lower loss, faster updates, lower accuracy, in every pair.
    s.FinishAttempt({e->queued[i], 1}, "succeeded", 0, "", "",
                    {{"eval.loss", (t ? 2.0 : 3.0) * k},
                     {"bench.update_ms", (t ? 5.0 : 10.0) * k},
                     {"mqar.accuracy", (t ? 0.5 : 0.9) * k}});
  }
  auto r = ComputeResults(s.db(), e->experiment_id);
  REQUIRE(r.ok());
  const Json& cs = (*r)["comparisons"];
  CHECK(cs[0]["verdict"] == "treatment better (95% CI excludes 0)");
  CHECK(cs[1]["better"] == "higher");  // speedup = b / t: above 1 when the treatment is faster
  CHECK(cs[1]["unit"] == "x");
  CHECK(cs[1]["verdict"].get<std::string>().rfind("treatment better", 0) == 0);
  CHECK(cs[2]["better"] == "higher");
  CHECK(cs[2]["verdict"] == "treatment worse (95% CI excludes 0)");
}

}  // namespace headlab::coord

namespace headlab::coord {
namespace {

// Axes seed x train.lr, paired by seed only: train.lr is a stratum, never pooled.
constexpr const char* kLrGrid = R"({
  "name": "lr", "base": {"kind": "noop"},
  "axes": {"seed": [1, 2], "train.lr": [0.001, 0.01]},
  "arms": {"base": {}, "treat": {"noop.metrics": 1}},
  "comparisons": [{"name": "dppl", "baseline": "base", "treatment": "treat",
                   "metric": "eval.ppl", "stat": "delta_pct"}]})";

// Runs in expansion order (arm, seed, train.lr): base 100 200 100 200, treat 98 230 96 146:
// ΔPPL% at lr 0.001: -2, -4 (mean -3, SE 1); at lr 0.01: +15, -27 (mean -6, SE 21).
// Pooling the four would give -4.5.
struct LrFixture {
  TempDir dir;
  Store s;
  int64_t exp = 0;
  LrFixture() {
    REQUIRE(s.Open(dir.path() + "/h.db").ok());
    auto grid = ExpandGrid(kLrGrid, "lr.jsonc", {});
    REQUIRE(grid.ok());
    auto e = s.InsertExperiment(*grid, {}, false);
    REQUIRE(e.ok());
    exp = e->experiment_id;
    const double ppl[] = {100, 200, 100, 200, 98, 230, 96, 146};
    for (int i = 0; i < 8; ++i) {
      REQUIRE(s.StartAttempt({e->queued[i], 1}, "w", {}, nullptr).ok());
      s.FinishAttempt({e->queued[i], 1}, "succeeded", 0, "", "", {{"eval.ppl", ppl[i]}});
    }
  }
};

}  // namespace

TEST_CASE("a comparison never pools levels of an axis it does not pair on") {
  LrFixture f;
  auto r = ComputeResults(f.s.db(), f.exp);
  REQUIRE(r.ok());
  CHECK((*r)["by"] == Json::array({"train.lr"}));
  const Json& cs = (*r)["comparisons"];
  REQUIRE(cs.size() == 2);
  CHECK(cs[0]["name"] == "dppl [train.lr=0.001]");
  CHECK(cs[0]["comparison"] == "dppl");
  CHECK(cs[0]["by"]["train.lr"].get<double>() == 0.001);
  CHECK(cs[0]["n"] == 2);
  CHECK(cs[0]["mean"].get<double>() == Approx(-3.0));
  CHECK(cs[0]["se"].get<double>() == Approx(1.0));
  CHECK(cs[1]["name"] == "dppl [train.lr=0.01]");
  CHECK(cs[1]["n"] == 2);
  CHECK(cs[1]["mean"].get<double>() == Approx(-6.0));
  CHECK(cs[1]["se"].get<double>() == Approx(21.0));
  // Arm means, too, stay within one learning rate.
  const Json& arms = (*r)["arms"];
  REQUIRE(arms.size() == 4);
  CHECK(arms[0]["arm"] == "base");
  CHECK(arms[0]["by"]["train.lr"].get<double>() == 0.001);
  CHECK(arms[0]["n"] == 2);
  CHECK(arms[0]["metrics"]["eval.ppl"]["mean"].get<double>() == Approx(100.0));
  CHECK(arms[1]["metrics"]["eval.ppl"]["mean"].get<double>() == Approx(200.0));
  CHECK(arms[2]["arm"] == "treat");
  CHECK(arms[2]["metrics"]["eval.ppl"]["mean"].get<double>() == Approx(97.0));
  CHECK(arms[3]["metrics"]["eval.ppl"]["mean"].get<double>() == Approx(188.0));
  // Each stratum is a paired_stats row of its own.
  REQUIRE(SavePairedStats(f.s.db(), f.exp, *r).ok());
  Stmt q = f.s.db()->MustPrepare("SELECT count(*) FROM paired_stats");
  REQUIRE(q.Step());
  CHECK(q.Int(0) == 2);
}

TEST_CASE("a one-value axis outside pair_by is no stratum") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto grid = ExpandGrid(kLrGrid, "lr.jsonc", {"train.lr=0.001", "train.steps=5"});
  REQUIRE(grid.ok());
  auto e = s.InsertExperiment(*grid, {}, false);
  REQUIRE(e.ok());
  auto r = ComputeResults(s.db(), e->experiment_id);
  REQUIRE(r.ok());
  CHECK((*r)["by"] == Json::array());
  REQUIRE((*r)["comparisons"].size() == 1);
  CHECK((*r)["comparisons"][0]["name"] == "dppl");
}

TEST_CASE("results --by breaks down further; --level sets the CI's confidence") {
  LrFixture f;
  auto opts = ParseResultsOptions("seed", "0.99");
  REQUIRE(opts.ok());
  auto r = ComputeResults(f.s.db(), f.exp, *opts);
  REQUIRE(r.ok());
  CHECK((*r)["by"] == Json::array({"seed", "train.lr"}));
  const Json& cs = (*r)["comparisons"];
  REQUIRE(cs.size() == 4);
  CHECK(cs[0]["name"] == "dppl [seed=1 train.lr=0.001]");
  CHECK(cs[0]["n"] == 1);
  CHECK(cs[0]["mean"].get<double>() == Approx(-2.0));
  CHECK(cs[3]["name"] == "dppl [seed=2 train.lr=0.01]");
  CHECK(cs[3]["mean"].get<double>() == Approx(-27.0));
  CHECK((*r)["arms"].size() == 8);

  auto lr = ComputeResults(f.s.db(), f.exp, *ParseResultsOptions("", "0.99"));
  REQUIRE(lr.ok());
  const Json& c = (*lr)["comparisons"][0];  // -2, -4: mean -3, SE 1, t(0.995; 1) = 63.657
  CHECK(c["ci"]["level"].get<double>() == 0.99);
  CHECK(c["ci"]["hi"].get<double>() == Approx(-3.0 + 63.657).epsilon(1e-4));
  CHECK(c["ci95"]["hi"].get<double>() == Approx(-3.0 + 12.706).epsilon(1e-4));
  CHECK(c["verdict"] == "no clear difference (99% CI includes 0)");

  auto typo = ParseResultsOptions("trian.lr", "");
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.status().message().find("did you mean \"train.lr\"") != std::string::npos);
  for (const char* bad : {"1", "0", "95", "x", "0.9x"})
    CHECK_FALSE(ParseResultsOptions("", bad).ok());
}

TEST_CASE("a finished experiment whose treatment failed says so, not 'no pair yet'") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  Grid g = TestGrid({"base", "treat"}, 2, "t", /*max_attempts=*/1);
  auto e = s.InsertExperiment(g, {}, false);
  REQUIRE(e.ok());
  for (int i = 0; i < 4; ++i) {
    REQUIRE(s.StartAttempt({e->queued[i], 1}, "w", {}, nullptr).ok());
    if (i < 2)
      s.FinishAttempt({e->queued[i], 1}, "succeeded", 0, "", "", {{"eval.ppl", 10.0}});
    else
      s.FinishAttempt({e->queued[i], 1}, "failed", 1, "boom", "", {});
  }
  auto r = ComputeResults(s.db(), e->experiment_id);
  REQUIRE(r.ok());
  INFO((*r)["comparisons"].dump());
  const std::string note = (*r)["comparisons"][0]["note"];
  CHECK(note.rfind("no pair: no run of arm \"treat\" succeeded", 0) == 0);
  CHECK(note.find("yet") == std::string::npos);
  CHECK((*r)["status_counts"]["succeeded"] == 2);
}

}  // namespace headlab::coord
