#include "coordinator/results_store.h"

#include <catch2/catch.hpp>
#include <functional>

#include "common/files.h"
#include "common/sha256.h"
#include "coordinator/results.h"
#include "coordinator/results_cache.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

// An experiment of arms base and treat with 2 pairs (seeds 1, 2), a comparison "cmp" of
// eval.ppl as ratio, and every run finished: base ppl 10, 20; treat ppl 9, 22 (ratios 0.9
// and 1.1). The last treat run fails when `fail_last` (its pair is then incomplete).
struct Finished {
  TempDir dir;
  Store s;
  Db reader;  // read-only, like the HTTP threads' and the PairedStatsWorker's
  int64_t exp = 0;
  std::vector<int64_t> runs;

  explicit Finished(bool fail_last = false) {
    REQUIRE(s.Open(dir.path() + "/h.db").ok());
    auto e = s.InsertExperiment(TestGrid({"base", "treat"}, 2), {}, false);
    REQUIRE(e.ok());
    exp = e->experiment_id;
    runs = e->queued;
    const double ppl[] = {10, 20, 9, 22};
    for (int i = 0; i < 4; ++i) {
      REQUIRE(s.StartAttempt({runs[i], 1}, "w", {}, nullptr).ok());
      if (fail_last && i == 3)
        s.FinishAttempt({runs[i], 1}, "failed", 1, "boom", "", {});
      else
        s.FinishAttempt({runs[i], 1}, "succeeded", 0, "", "", {{"eval.ppl", ppl[i]}});
    }
    REQUIRE(reader.Open(dir.path() + "/h.db", Db::Mode::kReadOnly).ok());
  }

  // GET .../results as the HTTP thread answers it; stores what it hands to the loop.
  Json Get(bool recompute = false, bool* handed = nullptr) {
    std::optional<ComputedResults> to_store;
    auto r = AnswerResults(&reader, exp, recompute, &to_store);
    REQUIRE(r.ok());
    if (handed) *handed = to_store.has_value();
    if (to_store) REQUIRE(StoreResults(s.db(), *to_store).ok());
    return *r;
  }
  bool Current() { return HasCurrentResults(s.db(), exp); }
};

// The answer without what AnswerResults adds to ComputeResults'.
Json Bare(Json j) {
  j.erase("computed_at");
  j.erase("stored");
  return j;
}

double Mean(const Json& answer) { return answer["comparisons"][0]["mean"].get<double>(); }

}  // namespace

TEST_CASE("a finished experiment's results are stored once and served while current") {
  Finished f;
  bool handed = false;
  Json first = f.Get(false, &handed);
  CHECK(first["stored"] == false);
  CHECK(handed);
  CHECK(Mean(first) == Approx(1.0));  // (0.9 + 1.1) / 2
  auto direct = ComputeResults(f.s.db(), f.exp);
  REQUIRE(direct.ok());
  CHECK(Bare(first) == *direct);
  CHECK(f.Current());
  Stmt ps = f.s.db()->MustPrepare("SELECT n, mean FROM paired_stats WHERE experiment_id=?");
  ps.Bind(1, f.exp);
  REQUIRE(ps.Step());
  CHECK(ps.Int(0) == 2);
  CHECK(ps.Real(1) == Approx(1.0));

  Json second = f.Get(false, &handed);
  CHECK(second["stored"] == true);
  CHECK_FALSE(handed);
  CHECK(second["computed_at"] == first["computed_at"]);
  CHECK(Bare(second) == *direct);  // the stored text reads back to the same answer

  // recompute=1 computes whatever is stored, and stores nothing when that is current.
  Json again = f.Get(true, &handed);
  CHECK(again["stored"] == false);
  CHECK_FALSE(handed);
  CHECK(Bare(again) == *direct);

  // What changes no result leaves it current: metrics, tags, notes.
  REQUIRE(f.s.InsertMetrics({f.runs[0], 1}, {{0, 0, "train.loss", 1.0, 0.0}}).ok());
  REQUIRE(f.s.db()
              ->Exec("INSERT INTO tags(target, target_id, tag, created_at) "
                     "VALUES ('experiment', " +
                     std::to_string(f.exp) + ", 'good', 'x')")
              .ok());
  CHECK(f.Get()["stored"] == true);
}

TEST_CASE("stored results go stale with any change to what they were computed from") {
  // Each change, by whichever writer (the store's calls or SQL by hand: the triggers of
  // schema/004_results.sql count them all), makes the stored answer stale: the next GET
  // computes it again and its numbers show the change.
  struct Change {
    const char* what;
    std::function<void(Finished&)> apply;
    std::function<void(const Json& answer)> check;
  };
  std::vector<Change> changes = {
      {"a summary metric arrives (eval.ppl of base seed 1: 10 -> 9)",
       [](Finished& f) {
         REQUIRE(f.s.db()
                     ->Exec("INSERT OR REPLACE INTO summaries(run_id, key, value, attempt) "
                            "VALUES (" +
                            std::to_string(f.runs[0]) + ", 'eval.ppl', 9, 1)")
                     .ok());
       },
       [](const Json& a) { CHECK(Mean(a) == Approx((1.0 + 1.1) / 2)); }},
      {"a new metric arrives (another summary key)",
       [](Finished& f) {
         REQUIRE(f.s.db()
                     ->Exec("INSERT INTO summaries(run_id, key, value, attempt) VALUES (" +
                            std::to_string(f.runs[0]) + ", 'eval.loss', 2.3, 1)")
                     .ok());
       },
       [](const Json& a) { CHECK(a["arms"][0]["metrics"].contains("eval.loss")); }},
      {"provenance of a run arrives (its device)",
       [](Finished& f) {
         REQUIRE(f.s.UpsertProvenance({f.runs[0], 1}, {{"device", "cuda:0 H200"}}).ok());
       },
       [](const Json& a) { CHECK(a["comparisons"][0]["device"] == "cuda:0 H200"); }},
      {"a run's logprobs artifact arrives",
       [](Finished& f) {
         REQUIRE(f.s.InsertArtifact({f.runs[0], 1}, 7, "logprobs", f.dir.path() + "/none.f32",
                                    Sha256Hex("x"), 1, 0)
                     .ok());
       },
       [](const Json& a) {  // an eval.* comparison reads the runs' logprobs artifacts
         CHECK(a["comparisons"][0]["logprob_diff"]["unavailable"].get<std::string>().find(
                   "none.f32") != std::string::npos);
       }},
      {"a run is deleted by hand",
       [](Finished& f) {
         REQUIRE(f.s.db()
                     ->Exec("DELETE FROM summaries WHERE run_id=" + std::to_string(f.runs[3]))
                     .ok());
         REQUIRE(
             f.s.db()->Exec("DELETE FROM attempts WHERE run_id=" + std::to_string(f.runs[3])).ok());
         REQUIRE(f.s.db()->Exec("DELETE FROM runs WHERE id=" + std::to_string(f.runs[3])).ok());
       },
       [](const Json& a) { CHECK(a["comparisons"][0]["n"] == 1); }},
      {"a run's status changes by hand",
       [](Finished& f) {
         REQUIRE(f.s.db()
                     ->Exec("UPDATE runs SET status='failed' WHERE id=" + std::to_string(f.runs[3]))
                     .ok());
       },
       [](const Json& a) { CHECK(a["comparisons"][0]["n"] == 1); }},
  };
  for (const Change& c : changes) {
    SECTION(c.what) {
      Finished f;
      f.Get();
      REQUIRE(f.Get()["stored"] == true);
      c.apply(f);
      CHECK_FALSE(f.Current());
      bool handed = false;
      Json a = f.Get(false, &handed);
      CHECK(a["stored"] == false);
      CHECK(handed);  // still finished: stored again
      c.check(a);
      CHECK(Bare(a) == *ComputeResults(f.s.db(), f.exp));
      CHECK(f.Get()["stored"] == true);
    }
  }
}

TEST_CASE("a retried run makes its experiment's stored results stale until it finishes again") {
  Finished f(/*fail_last=*/true);
  Json before = f.Get();
  CHECK(before["comparisons"][0]["n"] == 1);  // the failed run's pair is incomplete
  REQUIRE(f.Get()["stored"] == true);
  // The results the PairedStatsWorker computed from this snapshot ...
  std::optional<ComputedResults> computed;
  {
    ReadSnapshot snap(&f.reader);
    auto c = ComputeResultsAt(&f.reader, f.exp);
    REQUIRE(c.ok());
    CHECK(c->finished);
    computed = *c;
  }
  REQUIRE(f.s.RetryRun(f.runs[3]).ok());
  CHECK_FALSE(f.Current());
  // ... are not stored after the retry, nor are those of the unfinished experiment.
  CHECK(StoreResults(f.s.db(), *computed).value() == false);
  bool handed = true;
  Json during = f.Get(false, &handed);
  CHECK(during["stored"] == false);
  CHECK_FALSE(handed);
  CHECK(f.Get()["stored"] == false);
  // The retry's attempt succeeds: the pair is complete, and the new answer is stored.
  REQUIRE(f.s.StartAttempt({f.runs[3], 2}, "w", {}, nullptr).ok());
  f.s.FinishAttempt({f.runs[3], 2}, "succeeded", 0, "", "", {{"eval.ppl", 22.0}});
  Json after = f.Get(false, &handed);
  CHECK(after["stored"] == false);
  CHECK(handed);
  CHECK(after["comparisons"][0]["n"] == 2);
  CHECK(Mean(after) == Approx(1.0));
  CHECK(f.Get()["stored"] == true);
}

TEST_CASE("results stored by code of another answer format are computed again") {
  Finished f;
  f.Get();
  REQUIRE(f.Current());
  REQUIRE(f.s.db()->Exec("UPDATE results SET format = format + 1").ok());
  CHECK_FALSE(f.Current());
  CHECK(f.Get()["stored"] == false);
  CHECK(f.Get()["stored"] == true);
  Stmt s = f.s.db()->MustPrepare("SELECT format FROM results");
  REQUIRE(s.Step());
  CHECK(s.Int(0) == kResultsFormat);
}

TEST_CASE("nothing stored for a deleted experiment passes for a new one with its id") {
  // A submission the coordinator did not finish storing is deleted when it starts again
  // (Store::DeleteUnfinishedSubmissions): here one whose runs all reuse finished ones, so
  // that it is finished, and its results stored, before it is deleted.
  Finished f;
  auto again = f.s.InsertExperiment(TestGrid({"base", "treat"}, 2), {}, false);
  REQUIRE(again.ok());
  REQUIRE(again->reused == 4);
  const int64_t exp = again->experiment_id;
  std::optional<ComputedResults> to_store;
  REQUIRE(AnswerResults(&f.reader, exp, false, &to_store).ok());
  REQUIRE(to_store);
  REQUIRE(StoreResults(f.s.db(), *to_store).value());
  REQUIRE(HasCurrentResults(f.s.db(), exp));
  REQUIRE(f.s.DeleteExperiment(exp).ok());
  Stmt left = f.s.db()->MustPrepare(
      "SELECT (SELECT count(*) FROM results WHERE experiment_id=?1) + "
      "(SELECT count(*) FROM results_inputs WHERE experiment_id=?1) + "
      "(SELECT count(*) FROM paired_stats WHERE experiment_id=?1)");
  left.Bind(1, exp);
  REQUIRE(left.Step());
  CHECK(left.Int(0) == 0);
  auto other = f.s.InsertExperiment(TestGrid({"x", "y"}, 1, "other"), {}, false);
  REQUIRE(other.ok());
  CHECK(other->experiment_id == exp);  // the id is used again
  CHECK_FALSE(HasCurrentResults(f.s.db(), exp));
  to_store.reset();
  auto r = AnswerResults(&f.reader, exp, false, &to_store);
  REQUIRE(r.ok());
  CHECK((*r)["stored"] == false);
  CHECK((*r)["arms"][0]["arm"] == "x");
  CHECK_FALSE(to_store);                               // its runs are queued
  CHECK(HasCurrentResults(f.s.db(), f.exp) == false);  // the first was never asked
}

TEST_CASE("an unknown experiment has no results") {
  Finished f;
  std::optional<ComputedResults> to_store;
  auto r = AnswerResults(&f.reader, 999, false, &to_store);
  CHECK(r.status().code() == Status::Code::kNotFound);
  CHECK_FALSE(to_store);
  // The reader is not left inside its snapshot: it sees later commits.
  Json a = f.Get();
  CHECK(a["stored"] == false);
  REQUIRE(f.s.UpsertProvenance({f.runs[0], 1}, {{"device", "cpu"}}).ok());
  CHECK(f.Get()["comparisons"][0]["device"] == "cpu");
}

TEST_CASE("the compact answer is read from memory while the stored one is current") {
  // ResultsCache (results_cache.h) lives here beside the fixture it needs: a stored answer.
  Finished f;
  ResultsCache cache;
  int computed = 0;
  auto compute = [&]() -> StatusOr<Json> {
    ++computed;
    std::optional<ComputedResults> to_store;
    auto r = AnswerResults(&f.reader, f.exp, false, &to_store);
    if (to_store) REQUIRE(StoreResults(f.s.db(), *to_store).ok());
    return r;
  };
  auto trim = [](Json* j) { (*j)["comparisons"][0].erase("per_pair"); };
  auto get = [&] {
    auto r = cache.Answer(&f.reader, f.exp, compute, trim);
    REQUIRE(r.ok());
    return *r;
  };
  // Computed, then stored: neither is the stored answer yet when its request began.
  Json first = get();
  CHECK(first["stored"] == false);
  CHECK_FALSE(first["comparisons"][0].contains("per_pair"));
  Json second = get();
  CHECK(second["stored"] == true);
  CHECK(computed == 2);
  CHECK(cache.hits() == 0);
  // The stored answer's compact form, from memory, equal to what a read of it gives.
  Json third = get();
  CHECK(computed == 2);
  CHECK(cache.hits() == 1);
  CHECK(third == second);
  // A change to its inputs: the kept answer is stale and never served again.
  REQUIRE(f.s.db()
              ->Exec("INSERT OR REPLACE INTO summaries(run_id, key, value, attempt) "
                     "VALUES (" +
                     std::to_string(f.runs[0]) + ", 'eval.ppl', 9, 1)")
              .ok());
  Json fresh = get();
  CHECK(computed == 3);
  CHECK(fresh["stored"] == false);
  CHECK(Mean(fresh) == Approx((1.0 + 1.1) / 2));
  CHECK(Mean(get()) == Approx((1.0 + 1.1) / 2));  // stored again, read once more
  CHECK(computed == 4);
  Json kept = get();
  CHECK(computed == 4);
  CHECK(cache.hits() == 2);
  CHECK(Mean(kept) == Approx((1.0 + 1.1) / 2));
}

}  // namespace headlab::coord
