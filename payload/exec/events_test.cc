#include "payload/exec/events.h"

#include <cmath>
#include <cstdio>
#include <vector>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

std::vector<Json> Lines(FILE* f) {
  std::rewind(f);
  std::vector<Json> out;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) out.push_back(Json::parse(line));
  return out;
}

TEST_CASE("events: one JSON object per line; non-finite numbers never reach the stream") {
  FILE* f = std::tmpfile();
  REQUIRE(f);
  EventSink sink(f);
  sink.Metric(3, "train.loss", 2.5);
  sink.Metric(4, "train.loss", std::nan(""));
  sink.Artifact("checkpoint", "/x/ckpt", std::string(64, 'a'), 10, 4);
  sink.Summary({{"eval.loss", INFINITY}, {"train.loss", 2.5}});
  std::vector<Json> ev = Lines(f);
  std::fclose(f);
  REQUIRE(ev.size() == 4);
  CHECK(ev[0]["ev"] == "metric");
  CHECK(ev[0]["value"] == 2.5);
  CHECK(ev[0]["t"].is_number());
  CHECK(ev[1]["ev"] == "log");  // the NaN became a message
  CHECK(ev[2]["bytes"] == 10);
  CHECK(ev[3]["values"].size() == 1);
  CHECK(ev[3]["values"]["train.loss"] == 2.5);
}

}  // namespace
}  // namespace headlab
