#include "worker/command_report.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/sha256.h"
#include "common/testing/temp_dir.h"

namespace headlab {

TEST_CASE("report lines become exec events; bad lines name what is wrong") {
  testing::TempDir dir;
  ReportTranslator t(dir.path(), [] { return 1000.0; });
  auto m = t.Translate(
      R"({"ev":"metrics","step":3,"values":{"train.loss":2.5,"eval.loss":null},"t":7})");
  REQUIRE(m.ok());
  REQUIRE(m->size() == 2);
  CHECK((*m)[0] ==
        Json::parse(R"({"ev":"log","msg":"metric eval.loss at step 3 is not a finite number"})"));
  CHECK((*m)[1] == Json::parse(R"({"ev":"metric","step":3,"key":"train.loss","value":2.5,"t":7})"));
  auto one = t.Translate(R"({"ev":"metric","step":4,"key":"train.loss","value":2.0})");
  REQUIRE(one.ok());
  CHECK((*one)[0]["t"] == 1000.0);  // stamped on arrival
  CHECK(t.Translate("not json").status().message() == "not a JSON line");
  CHECK(t.Translate(R"({"ev":"metric","step":-1,"key":"k","value":1})").status().message() ==
        "metric.step: expected an integer >= 0");
  CHECK(t.Translate(R"({"ev":"metric","step":1,"key":"bad key","value":1})").status().message() ==
        "metric.key: expected a name matching [A-Za-z0-9_.-]{1,128}");
  CHECK(t.Translate(R"({"ev":"metrics","step":1,"values":{"a":"x"}})").status().message() ==
        "metric a: expected a number, got \"x\"");
  CHECK(t.Translate(R"({"ev":"bogus"})").status().message().rfind("unknown ev \"bogus\"", 0) == 0);
  CHECK(t.Translate(R"({"ev":"summary","values":{"s":"x"}})").status().code() ==
        Status::Code::kInvalidArgument);
  // Summary: every metric's last value, overridden by the program's own summaries.
  REQUIRE(t.Translate(R"({"ev":"summary","values":{"eval.loss":1.5}})").ok());
  REQUIRE(t.Translate(R"({"ev":"summary","values":{"acc":0.9}})").ok());
  CHECK(t.FinalSummary() ==
        Json::parse(R"({"ev":"summary","values":{"train.loss":2.0,"eval.loss":1.5,"acc":0.9}})"));
  CHECK(ReportTranslator(dir.path(), [] { return 0.0; }).FinalSummary().is_null());
}

TEST_CASE("artifacts are hashed by the runner and must stay in the run directory") {
  testing::TempDir dir;
  REQUIRE(WriteFileAtomic(dir.path() + "/ckpt.bin", "weights").ok());
  ReportTranslator t(dir.path(), [] { return 0.0; });
  auto a = t.Translate(R"({"ev":"artifact","kind":"checkpoint","path":"ckpt.bin","step":20})");
  REQUIRE(a.ok());
  const Json& ev = (*a)[0];
  CHECK(ev["path"] == dir.path() + "/ckpt.bin");
  CHECK(ev["sha256"] == Sha256Hex("weights"));
  CHECK(ev["bytes"] == 7);
  CHECK(ev["step"] == 20);
  auto outside = t.Translate(R"({"ev":"artifact","kind":"x","path":"/etc/hostname","step":0})");
  REQUIRE(!outside.ok());
  CHECK(outside.status().message().find("outside the run directory") != std::string::npos);
  CHECK(!t.Translate(R"({"ev":"artifact","kind":"x","path":"../escape","step":0})").ok());
  CHECK(!t.Translate(R"({"ev":"artifact","kind":"x","path":"missing.bin","step":0})").ok());
  CHECK(!t.Translate(R"({"ev":"artifact","kind":"x","path":".","step":0})").ok());
}

}  // namespace headlab
