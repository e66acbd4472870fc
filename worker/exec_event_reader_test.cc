#include "worker/exec_event_reader.h"

#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("ParseExecEvent accepts each well-formed event") {
  auto m = ParseExecEvent(
      R"({"ev":"metric","step":10,"key":"train.loss","value":2.5,"t":1700000000.5})");
  REQUIRE(m.ok());
  CHECK(m->type == ExecEvent::Type::kMetric);
  CHECK(m->step == 10);
  CHECK(m->key == "train.loss");
  CHECK(m->value == 2.5);
  CHECK(m->time_s == 1700000000.5);

  auto a = ParseExecEvent(
      R"({"ev":"artifact","kind":"checkpoint","path":"/o/c.pt","sha256":"ab","bytes":12,"step":100})");
  REQUIRE(a.ok());
  CHECK(a->type == ExecEvent::Type::kArtifact);
  CHECK(a->kind == "checkpoint");
  CHECK(a->path == "/o/c.pt");
  CHECK(a->bytes == 12);
  CHECK(a->step == 100);

  auto p = ParseExecEvent(R"({"ev":"provenance","fields":{"libtorch_version":"1.13"}})");
  REQUIRE(p.ok());
  CHECK(p->object["libtorch_version"] == "1.13");

  auto s = ParseExecEvent(R"({"ev":"summary","values":{"eval.ppl":3.5,"steps":200}})");
  REQUIRE(s.ok());
  CHECK(s->object["eval.ppl"] == 3.5);

  auto l = ParseExecEvent(R"({"ev":"log","msg":"hello"})");
  REQUIRE(l.ok());
  CHECK(l->type == ExecEvent::Type::kLog);
  CHECK(l->key == "hello");
}

TEST_CASE("ParseExecEvent stamps a metric without t") {
  auto m = ParseExecEvent(R"({"ev":"metric","step":0,"key":"k","value":1})");
  REQUIRE(m.ok());
  CHECK(m->time_s > 1.6e9);
}

TEST_CASE("ParseExecEvent rejects malformed lines") {
  const char* bad[] = {
      "",
      "loss=2.5",
      "[1,2,3]",
      "{\"ev\":\"metric\",\"step\":1,\"key\":\"k\"",  // truncated
      R"({"step":1,"key":"k","value":1})",            // no ev
      R"({"ev":42})",
      R"({"ev":"teleport"})",
      R"({"ev":"metric","step":-1,"key":"k","value":1})",
      R"({"ev":"metric","step":1.5,"key":"k","value":1})",
      R"({"ev":"metric","step":1,"key":"","value":1})",
      R"({"ev":"metric","step":1,"key":"k","value":"1"})",
      R"({"ev":"metric","step":1,"key":"k","value":1,"t":"now"})",
      R"({"ev":"artifact","kind":"checkpoint","path":"p","sha256":"h","step":1})",  // no bytes
      R"({"ev":"artifact","kind":"checkpoint","path":"","sha256":"h","bytes":1,"step":1})",
      R"({"ev":"provenance","fields":[1]})",
      R"({"ev":"summary","values":{"a":"x"}})",
      R"({"ev":"log"})",
  };
  for (const char* line : bad) {
    INFO(line);
    CHECK(!ParseExecEvent(line).ok());
  }
}

}  // namespace headlab
