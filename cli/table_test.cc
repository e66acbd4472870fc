#include "cli/table.h"

#include <catch2/catch.hpp>

#include "cli/export.h"
#include "cli/wait.h"

using headlab::Json;

TEST_CASE("Tables align columns; numeric columns are right-aligned") {
  std::string t = headlab::FormatTable({"arm", "n", "ppl"},
                                       {{"ordinary", "3", "12.5 ± 0.1"}, {"wide", "10", "9 ± 2"}});
  CHECK(t ==
        "arm        n  ppl\n"
        "--------  --  ----------\n"
        "ordinary   3  12.5 ± 0.1\n"
        "wide      10  9 ± 2\n");
  CHECK(headlab::FormatTable({}, {{"a", "b"}}) == "a  b\n");
}

TEST_CASE("CSV quotes only where RFC 4180 needs it") {
  CHECK(headlab::CsvField("plain") == "plain");
  CHECK(headlab::CsvField("a,b") == "\"a,b\"");
  CHECK(headlab::CsvField("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(headlab::CsvField("two\nlines") == "\"two\nlines\"");
  CHECK(headlab::FormatCsv({"x", "y"}, {{"1", "[1,2]"}}) == "x,y\n1,\"[1,2]\"\n");
}

TEST_CASE("Numbers, cells and mean ± SE") {
  CHECK(headlab::FormatNumber(0.00123456789) == "0.00123457");
  CHECK(headlab::FormatNumber(42) == "42");
  // Mean and SE at one precision, set by the SE's second significant digit.
  CHECK(headlab::FormatMeanSe(Json(12.5), Json(0.25)) == "12.50 ± 0.25");
  CHECK(headlab::FormatMeanSe(Json(11148.2), Json(171)) == "11148 ± 171");
  CHECK(headlab::FormatMeanSe(Json(0.0953984), Json(0.00026)) == "0.09540 ± 0.00026");
  CHECK(headlab::FormatMeanSe(Json(-3.5), Json(1.5)) == "-3.5 ± 1.5");
  CHECK(headlab::FormatMeanSe(Json(100), Json(0)) == "100 ± 0");
  CHECK(headlab::FormatMeanSe(Json(2.5e9), Json(1e6)) == "2.50e+09 ± 1.0e+06");
  CHECK(headlab::FormatBytesMeanSe(Json(189.0 * 1048576), Json()) == "189.0 MiB");
  CHECK(headlab::FormatBytesMeanSe(Json(1.5 * 1073741824), Json(12.3 * 1048576)) ==
        "1.500 ± 0.012 GiB");
  CHECK(headlab::FormatBytesMeanSe(Json(512), Json(3)) == "512.0 ± 3.0 B");
  CHECK(headlab::FormatMeanSe(Json(12.5), Json()) == "12.5");
  CHECK(headlab::FormatMeanSe(Json(), Json(1)) == "-");
  CHECK(headlab::Cell(Json("s")) == "s");
  CHECK(headlab::Cell(Json()) == "");
  CHECK(headlab::Cell(Json(7)) == "7");
  CHECK(headlab::Cell(Json::parse("[1]")) == "[1]");
  Json f = headlab::FlattenObject(Json::parse(R"({"a": {"b": 1, "c": {"d": "x"}}, "e": [1]})"));
  CHECK(f == Json::parse(R"({"a.b": 1, "a.c.d": "x", "e": [1]})"));
  CHECK(headlab::FlattenObject(Json::object()).empty());
}

TEST_CASE("Export CSV: one row per run, config in schema order, then summary metrics") {
  Json runs = Json::parse(R"([
    {"id": 1, "arm": "a", "status": "succeeded", "attempts": 1, "config_hash": "h1",
     "pair_key": "[1]", "config": {"seed": 1, "model": {"layers": 2}},
     "summary": {"eval.ppl": 12.5}},
    {"id": 2, "arm": "b", "status": "failed", "attempts": 3, "config_hash": "h2",
     "pair_key": "[1]", "config": {"seed": 1, "model": {"layers": 4}},
     "summary": {"train.loss": 2.0}}])");
  headlab::TableRow header;
  std::vector<headlab::TableRow> rows;
  headlab::ExportTable(runs, &header, &rows);
  REQUIRE(rows.size() == 2);
  CHECK(header[0] == "id");
  CHECK(header[6] == "config.kind");
  CHECK(header[7] == "config.seed");
  CHECK(header[8] == "config.model.layers");
  CHECK(header[header.size() - 2] == "summary.eval.ppl");
  CHECK(header.back() == "summary.train.loss");
  CHECK(rows[0][8] == "2");
  CHECK(rows[1][8] == "4");
  CHECK(rows[0][6] == "");  // not in this run's config
  CHECK(rows[0][header.size() - 2] == "12.5");
  CHECK(rows[0].back() == "");
  CHECK(rows[1].back() == "2.0");
}

TEST_CASE("wait: progress from counts, finished and exit semantics") {
  auto p = headlab::ProgressFromExperiment(Json::parse(
      R"({"counts": {"succeeded": 3, "failed": 1, "running": 1, "queued": 1}, "total": 6})"));
  CHECK(p.total == 6);
  CHECK(!p.Finished());
  CHECK(headlab::ProgressLine(p, 12.7, 12) ==
        "[######xx>>..] 4/6 done  succeeded 3  failed 1  running 1  queued 1  12s");
  p.running = p.queued = 0;
  p.succeeded = 5;
  CHECK(p.Finished());
  CHECK(!p.AllSucceeded());
  auto all = headlab::ProgressFromExperiment(Json::parse(R"({"counts": {"succeeded": 2}})"));
  CHECK(all.total == 2);
  CHECK(all.Finished());
  CHECK(all.AllSucceeded());
}

// `wait` shows an ETA as the dashboard computes it (dashboards/src/format.js eta()).
TEST_CASE("wait's ETA: queued runs take the mean, running ones what is left of it") {
  headlab::Progress p;
  p.total = 10;
  p.succeeded = 4;
  p.queued = 4;
  p.running = 2;
  headlab::Timing t;
  CHECK(headlab::EstimateRemainingS(p, t) == -1);  // nothing succeeded yet: no rate
  t.mean_s = 60;
  t.running_elapsed_s = {30, 90};
  // (4 * 60 + (60 - 30) + max(0, 60 - 90)) / 2 running = 135 s.
  CHECK(headlab::EstimateRemainingS(p, t) == Approx(135.0));
  t.running_elapsed_s = {30};  // one running run unseen: a full mean
  CHECK(headlab::EstimateRemainingS(p, t) == Approx((240.0 + 30 + 60) / 2));
  CHECK(headlab::ProgressLine(p, 12.7, 10, 135).find("  12s  ETA ≈ 2m15s") != std::string::npos);
  CHECK(headlab::ProgressLine(p, 12.7, 10, -1).find("ETA") == std::string::npos);
  CHECK(headlab::FormatDuration(7265) == "2h01m");
  CHECK(headlab::FormatDuration(44.6) == "45s");
  p.queued = p.running = 0;
  p.succeeded = 10;
  CHECK(headlab::EstimateRemainingS(p, t) == 0);
}

namespace headlab {

// Bytes used to be shown raw ("2.40652e+08").
TEST_CASE("bytes get a binary unit, by value and by key") {
  CHECK(FormatBytes(512) == "512 B");
  CHECK(FormatBytes(240652000) == "229.5 MiB");
  CHECK(FormatBytes(1024.0 * 1024 * 1024) == "1.00 GiB");
  CHECK(IsBytesKey("mem.peak_bytes"));
  CHECK(IsBytesKey("aoh.bench.kv_bytes"));
  CHECK(IsBytesKey("bytes"));
  CHECK_FALSE(IsBytesKey("eval.ppl"));
  CHECK_FALSE(IsBytesKey("bytesize"));
  CHECK(KeyedCell("mem.peak_bytes", Json(240652000.0)) == "229.5 MiB");
  CHECK(KeyedCell("eval.ppl", Json(9110.08)) == "9110.08");
}

}  // namespace headlab
