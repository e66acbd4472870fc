#include "payload/exec/head_state.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

TEST_CASE("head modes: the config syntax expands wildcards in order") {
  auto r = ParseHeadModes("0.1=local:32,1.*=streaming:4:16,1.3=pruned", 2, 4, "f: $.x");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 6);
  CHECK((*r)[0].layer == 0);
  CHECK((*r)[0].head == 1);
  CHECK((*r)[0].state.mode == HeadMode::kLocal);
  CHECK((*r)[0].state.window == 32);
  CHECK((*r)[4].state.mode == HeadMode::kStreaming);
  CHECK((*r)[4].state.sink == 4);
  CHECK((*r)[4].state.recent == 16);
  CHECK((*r)[4].state.chunk == 0);  // no CHUNK: token eviction
  CHECK((*r)[5].head == 3);
  CHECK((*r)[5].state.mode == HeadMode::kPruned);
  CHECK(ParseHeadModes("", 2, 4, "f")->empty());
  auto c = ParseHeadModes("0.0=streaming:4:16:64", 1, 1, "f");
  REQUIRE(c.ok());
  CHECK((*c)[0].state.chunk == 64);
  CHECK(std::string(HeadModeName(HeadMode::kFixed)) == "fixed");
}

TEST_CASE("head modes: bad items are named") {
  for (const char* bad : {"0.1", "2.0=pruned", "0.4=pruned", "0.0=local:0", "0.0=local",
                          "0.0=streaming:1:0", "0.0=streaming:1:2:0", "0.0=streaming:1:2:3:4",
                          "0.0=fixed", "x.0=pruned", "0.0=pruned,", "0.-1=pruned"}) {
    auto r = ParseHeadModes(bad, 2, 4, "f: $.config.model.head_modes");
    INFO(bad);
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("f: $.config.model.head_modes: ") == 0);
  }
}

}  // namespace
}  // namespace headlab
