// What a running attempt reports: metric points (idempotent, multi-row), provenance.
#include "coordinator/store.h"

#include <catch2/catch.hpp>

#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("metrics ingestion is idempotent per (run, attempt, seq)") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  REQUIRE(e.ok());
  AttemptRef ref{e->queued[0], 1};
  REQUIRE(s.StartAttempt(ref, "w", {}, nullptr).ok());
  std::vector<MetricPoint> pts;
  for (int i = 0; i < 10; ++i) pts.push_back({i, i * 10, "train.loss", 1.0 / (i + 1), 100.0 + i});
  pts.push_back({10, 100, "train.loss", std::nullopt, 111});
  REQUIRE(s.InsertMetrics(ref, pts).ok());
  REQUIRE(s.InsertMetrics(ref, pts).ok());  // a resend
  CHECK(Count(s, "SELECT count(*) FROM metrics") == 11);
  CHECK(Count(s, "SELECT count(*) FROM metrics WHERE value IS NULL") == 1);
  REQUIRE(s.InsertArtifact(ref, 0, "checkpoint", "/x/ckpt", "ab", 10, 100).ok());
  REQUIRE(s.InsertArtifact(ref, 0, "checkpoint", "/x/ckpt", "ab", 10, 100).ok());
  CHECK(Count(s, "SELECT count(*) FROM artifacts") == 1);
}

TEST_CASE("large metric batches (multi-row inserts) keep every point once") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  AttemptRef ref{e->queued[0], 1};
  REQUIRE(s.StartAttempt(ref, "w", {}, nullptr).ok());
  std::vector<MetricPoint> pts;
  for (int i = 0; i < 150; ++i)
    pts.push_back({i, i, i % 2 ? "train.loss" : "eval.loss", double(i), 1000.0 + i});
  REQUIRE(s.InsertMetrics(ref, pts).ok());
  // A resend overlapping the first half, shifted: seqs 75..224.
  for (auto& p : pts) p.seq += 75;
  REQUIRE(s.InsertMetrics(ref, pts).ok());
  CHECK(Count(s, "SELECT count(*) FROM metrics") == 225);
  CHECK(Count(s, "SELECT sum(seq) FROM metrics") == 224 * 225 / 2);
  CHECK(Count(s, "SELECT value FROM metrics WHERE seq = 74") == 74);  // first write kept
  CHECK(Count(s, "SELECT value FROM metrics WHERE seq = 200") == 125);
}

TEST_CASE("provenance from worker and exec merges into one row") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  AttemptRef ref{e->queued[0], 1};
  REQUIRE(s.StartAttempt(ref, "w", {}, nullptr).ok());
  REQUIRE(
      s.UpsertProvenance(ref, {{"git_commit", "abc"}, {"git_dirty", true}, {"host", "h1"}}).ok());
  REQUIRE(s.UpsertProvenance(ref, {{"libtorch_version", "1.13"}, {"dataset_sha256", "dd"}}).ok());
  Stmt q = s.db()->MustPrepare(
      "SELECT git_commit, git_dirty, host, libtorch_version, dataset_sha256, fields_json "
      "FROM provenance");
  REQUIRE(q.Step());
  CHECK(q.Text(0) == "abc");
  CHECK(q.Int(1) == 1);
  CHECK(q.Text(2) == "h1");
  CHECK(q.Text(3) == "1.13");
  CHECK(q.Text(4) == "dd");
  CHECK(ParseJson(q.Text(5), "x")->size() == 5);
  CHECK_FALSE(q.Step());
}

}  // namespace headlab::coord
