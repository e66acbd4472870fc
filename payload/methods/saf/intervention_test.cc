#include "payload/methods/saf/intervention.h"

#include <algorithm>

#include "payload/exec/model.h"
#include "payload/methods/saf/saf_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

constexpr int64_t kT = 16;

Gpt TinyGpt() {
  torch::manual_seed(31);
  return Gpt(testing::TinyGptConfig(kT, 2));
}

InterventionInputs Inputs(Gpt& gpt, int64_t k) {
  InterventionInputs in;
  in.view = ViewOfGpt(*gpt);
  for (int64_t l = 0; l < 2; ++l) in.layers.push_back(gpt->attention(l).get());
  torch::manual_seed(32);
  for (int b = 0; b < 3; ++b)
    in.calibration.push_back(torch::randint(0, 64, {2, kT}, torch::kLong));
  in.k = k;
  return in;
}

int64_t CountFixed(Gpt& gpt) {
  int64_t n = 0;
  for (int64_t l = 0; l < 2; ++l)
    for (const HeadState& s : gpt->attention(l)->head_states()) n += s.mode == HeadMode::kFixed;
  return n;
}

TEST_CASE("an intervention installs exactly k fixed heads in score order and reports them") {
  Gpt gpt = TinyGpt();
  torch::Tensor q_before = gpt->attention(0)->q_proj->weight.clone();
  SafOptions o;
  o.method = "replace";
  auto r = RunIntervention(o, Inputs(gpt, TargetHeadCount(0.5, 2, 4)));
  REQUIRE(r.ok());
  CHECK(r->installed.size() == 4);
  CHECK(CountFixed(gpt) == 4);
  CHECK(torch::equal(q_before, gpt->attention(0)->q_proj->weight));  // weights untouched

  const InterventionReport& rep = r->report;
  REQUIRE(rep.head_map.size() == 8);
  int64_t fixed = 0;
  std::vector<double> fixed_scores, other_scores;
  for (const HeadMapRow& row : rep.head_map) {
    if (row.role == "fixed") {
      ++fixed;
      REQUIRE(row.fit_kl.has_value());
      CHECK(*row.fit_kl <= 0.2);
      CHECK(row.pattern == "mean");
      fixed_scores.push_back(row.score);
    } else {
      other_scores.push_back(row.score);
    }
  }
  CHECK(fixed == 4);
  // Every installed head has a lower variance than every head left ordinary (all fits pass
  // on this small model, so no candidate was skipped).
  if (rep.fits_rejected == 0)
    CHECK(*std::max_element(fixed_scores.begin(), fixed_scores.end()) <=
          *std::min_element(other_scores.begin(), other_scores.end()));
  CHECK(rep.cost.calibration_s >= 0);
  CHECK(rep.cost.total_s() >= rep.cost.fitting_s);
  Json j = ToJson(rep);
  CHECK(j["k"] == 4);
  CHECK(j["head_map"].size() == 8);
  CHECK(j["cost_s"].contains("installation"));

  // The model still runs, and an undo restores ordinary attention.
  torch::Tensor tokens = torch::randint(0, 64, {1, kT}, torch::kLong);
  CHECK(gpt->forward(tokens).isfinite().all().item<bool>());
  const HeadId u = r->installed[0];
  RevertToOrdinary(*gpt->attention(u.layer), u.head);
  CHECK(CountFixed(gpt) == 3);

  // A later event only considers heads that are still ordinary.
  auto again = RunIntervention(o, Inputs(gpt, 2));
  REQUIRE(again.ok());
  CHECK(CountFixed(gpt) == 5);
}

TEST_CASE("selection fails clearly when k fits cannot pass; prescribed sets are not substituted") {
  Gpt gpt = TinyGpt();
  SafOptions o;
  o.fit_max_kl = 0.0;  // nothing passes
  o.fit_steps = 5;
  auto r = RunIntervention(o, Inputs(gpt, 2));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("needs 2 heads") != std::string::npos);
  CHECK(CountFixed(gpt) == 0);

  InterventionInputs in = Inputs(gpt, 2);
  in.prescribed = {{0, 1}, {1, 2}};
  auto p = RunIntervention(o, in);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().message().find("prescribed head 0.1") != std::string::npos);
  CHECK(CountFixed(gpt) == 0);

  o.fit_max_kl = 0.2;
  o.fit_steps = 400;
  auto ok = RunIntervention(o, in);
  REQUIRE(ok.ok());
  CHECK(ok->installed == std::vector<HeadId>{{0, 1}, {1, 2}});
}

TEST_CASE(
    "dense and sampled patterns install as dense heads; random selection matches per-layer "
    "counts") {
  Gpt gpt = TinyGpt();
  SafOptions o;
  o.pattern = PatternKind::kDirichlet;
  auto r = RunIntervention(o, Inputs(gpt, 3));
  REQUIRE(r.ok());
  for (const HeadId& u : r->installed)
    CHECK(gpt->attention(u.layer)->head_states()[size_t(u.head)].dense);

  Gpt a = TinyGpt(), b = TinyGpt();
  SafOptions var;
  SafOptions rnd;
  rnd.score = ScoreKind::kRandom;
  auto rv = RunIntervention(var, Inputs(a, 3));
  auto rr = RunIntervention(rnd, Inputs(b, 3));
  REQUIRE(rv.ok());
  REQUIRE(rr.ok());
  CHECK(PerLayerCounts(rv->installed, 2) == PerLayerCounts(rr->installed, 2));
}

// The random control's heads with shuffle seed `seed`, sorted by (layer, head).
std::vector<HeadId> RandomHeads(uint64_t seed) {
  SafOptions rnd;
  rnd.score = ScoreKind::kRandom;
  Gpt gpt = TinyGpt();
  InterventionInputs in = Inputs(gpt, 3);
  in.selection_seed = seed;
  in.install = false;
  auto r = RunIntervention(rnd, in);
  REQUIRE(r.ok());
  std::vector<HeadId> heads = r->installed;
  std::sort(heads.begin(), heads.end(), [](const HeadId& a, const HeadId& b) {
    return a.layer * 4 + a.head < b.layer * 4 + b.head;
  });
  return heads;
}

TEST_CASE("random selection draws its heads per run: the shuffle follows selection_seed") {
  std::vector<std::vector<HeadId>> sets, distinct;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    sets.push_back(RandomHeads(seed));
    // The variance selection's per-layer counts, whatever the draw.
    CHECK(PerLayerCounts(sets.back(), 2) == PerLayerCounts(sets.front(), 2));
    if (std::find(distinct.begin(), distinct.end(), sets.back()) == distinct.end())
      distinct.push_back(sets.back());
  }
  CHECK(distinct.size() > 1);        // another run seed, another draw
  CHECK(RandomHeads(5) == sets[5]);  // the same seed, the same heads
}

// SAF §4 / App. C.1: "rate comparisons use nested subsets of one ranking". On one model and
// one calibration the selections at increasing k extend each other, and (no fit rejected)
// are the k lowest eq. 1 variances.
TEST_CASE("selections at increasing rates are nested prefixes of one variance ranking") {
  SafOptions o;
  std::vector<HeadId> previous;
  for (int64_t k : {1, 2, 4, 6, 8}) {
    Gpt gpt = TinyGpt();
    InterventionInputs in = Inputs(gpt, k);
    in.install = false;
    auto r = RunIntervention(o, in);
    REQUIRE(r.ok());
    REQUIRE(r->report.fits_rejected == 0);
    REQUIRE(int64_t(r->installed.size()) == k);
    CHECK(std::equal(previous.begin(), previous.end(), r->installed.begin()));
    std::vector<std::pair<double, int64_t>> by_score;
    for (const HeadMapRow& row : r->report.head_map)
      by_score.push_back({row.score, row.layer * 4 + row.head});
    std::sort(by_score.begin(), by_score.end());
    for (int64_t i = 0; i < k; ++i)
      CHECK(r->installed[size_t(i)].layer * 4 + r->installed[size_t(i)].head ==
            by_score[size_t(i)].second);
    previous = r->installed;
  }
}

TEST_CASE("pruning controls: variance pruning and gate-Taylor pruning set heads pruned") {
  Gpt gpt = TinyGpt();
  SafOptions o;
  o.method = "prune";
  o.score = ScoreKind::kGateTaylor;
  auto r = RunIntervention(o, Inputs(gpt, 3));
  REQUIRE(r.ok());
  int64_t pruned = 0;
  for (const HeadMapRow& row : r->report.head_map) {
    pruned += row.role == "pruned";
    CHECK_FALSE(row.fit_kl.has_value());  // gate-Taylor pruning fits nothing
  }
  CHECK(pruned == 3);
  // Within a layer the scores are normalised: sum of squares 1 per layer.
  double sq = 0;
  for (const HeadMapRow& row : r->report.head_map)
    if (row.layer == 0) sq += row.score * row.score;
  CHECK(sq == Approx(1.0));
  CHECK(gpt->forward(torch::randint(0, 64, {1, kT}, torch::kLong)).isfinite().all().item<bool>());
}

TEST_CASE("configurations that cannot run are refused before anything is installed") {
  Gpt gpt = TinyGpt();
  SafOptions o;
  o.score = ScoreKind::kGradient;
  CHECK_FALSE(RunIntervention(o, Inputs(gpt, 2)).ok());  // no gradient EMA
  o.score = ScoreKind::kVariance;
  o.trainable = true;  // trainable alpha/rho need compact patterns
  o.storage = "dense";
  CHECK_FALSE(RunIntervention(o, Inputs(gpt, 2)).ok());
  o.trainable = false;
  o.storage = "compact";
  InterventionInputs in = Inputs(gpt, 2);
  in.calibration = {torch::randint(0, 64, {2, kT / 2}, torch::kLong)};
  CHECK_FALSE(RunIntervention(o, in).ok());  // calibration shorter than the context
  CHECK(CountFixed(gpt) == 0);
}

TEST_CASE("chunked calibration and batched fits select, fit and report as one pass does") {
  for (ScoreKind score : {ScoreKind::kVariance, ScoreKind::kForwardKl, ScoreKind::kResidualCos}) {
    INFO("score " << ScoreKindName(score));
    SafOptions chunked, whole;
    chunked.score = whole.score = score;
    chunked.calib_memory_gb = 1e-9;  // one layer per chunk
    Gpt a = TinyGpt(), b = TinyGpt();
    auto ra = RunIntervention(chunked, Inputs(a, 5));
    auto rb = RunIntervention(whole, Inputs(b, 5));
    REQUIRE(ra.ok());
    REQUIRE(rb.ok());
    CHECK(ra->report.memory.layers_per_chunk == 1);
    CHECK(rb->report.memory.layers_per_chunk == 2);
    CHECK(ra->report.memory.statistics_bytes_peak > 0);
    CHECK(ra->installed == rb->installed);
    CHECK(ra->report.fits_run == rb->report.fits_run);
    REQUIRE(ra->report.head_map.size() == rb->report.head_map.size());
    for (size_t i = 0; i < ra->report.head_map.size(); ++i) {
      const HeadMapRow &x = ra->report.head_map[i], &y = rb->report.head_map[i];
      CHECK(x.score == y.score);
      CHECK(x.rank == y.rank);
      CHECK(x.role == y.role);
      CHECK(x.fit_kl == y.fit_kl);
    }
    for (size_t i = 0; i < ra->patterns.size(); ++i)
      CHECK(torch::equal(ra->patterns[i].alpha, rb->patterns[i].alpha));
    // The fits are the per-head fits of the heads' mean patterns.
    CalibrationStats stats(2, 4, {});
    Calibrate(ViewOfGpt(*TinyGpt()), Inputs(a, 5).calibration, &stats);
    const HeadId u = ra->installed[0];
    CompactFit one = FitCompact(PrepareTarget(stats.Mean(u.layer, u.head)));
    CHECK(ra->report.head_map[size_t(u.layer * 4 + u.head)].fit_kl.value() ==
          Approx(one.kl).epsilon(1e-9));
    CHECK(torch::allclose(ra->patterns[0].alpha, one.alpha.to(torch::kFloat32)));
  }
}

TEST_CASE("calibration batches come from a generator of their own") {
  std::vector<uint16_t> data(4000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint16_t(i % 251);
  TokenSpan span;
  span.data = data.data();
  span.size = int64_t(data.size());
  auto a = DrawCalibrationBatches(span, kT, 5, 2, 7, torch::kCPU);
  auto b = DrawCalibrationBatches(span, kT, 5, 2, 7, torch::kCPU);
  REQUIRE(a.size() == 3);
  CHECK(a[2].size(0) == 1);
  CHECK(a[0].size(1) == kT);
  CHECK(torch::equal(a[0], b[0]));
  // A training sampler with the run seed is not advanced and draws differently.
  BatchSampler train(7, kT);
  std::vector<int64_t> offsets = train.NextOffsets(span.size, 2);
  const bool differs = a[0][0][0].item<int64_t>() != int64_t(data[size_t(offsets[0])]) ||
                       a[0][1][0].item<int64_t>() != int64_t(data[size_t(offsets[1])]);
  CHECK(differs);
}

}  // namespace
}  // namespace headlab::saf
