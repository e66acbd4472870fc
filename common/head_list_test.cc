#include "common/head_list.h"

#include <catch2/catch.hpp>

namespace headlab {
namespace {

std::string ErrorOf(const StatusOr<std::vector<HeadAt>>& r) {
  return r.ok() ? "" : r.status().message();
}

TEST_CASE("a head list keeps its order, expands wildcards and refuses repeats") {
  auto r = ParseHeadList("1.2,*.0", 2, 4, "w");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 3);
  CHECK(((*r)[0].layer == 1 && (*r)[0].head == 2));
  CHECK(((*r)[1].layer == 0 && (*r)[1].head == 0));
  CHECK(((*r)[2].layer == 1 && (*r)[2].head == 0));
  CHECK(ParseHeadList("0.*", 2, 4, "w")->size() == 4);
  CHECK(ParseHeadList("*.*", 3, 5, "w")->size() == 15);
  CHECK(ParseHeadList("", 2, 4, "w")->empty());
  CHECK(ErrorOf(ParseHeadList("1.4", 2, 4, "p")) == "p: head 1.4 is outside the model's 2 x 4");
  CHECK(ErrorOf(ParseHeadList("9.9", 2, 4, "p")) == "p: head 9.9 is outside the model's 2 x 4");
  CHECK(ErrorOf(ParseHeadList("0.1,0.*", 2, 4, "p")) == "p: head 0.1 listed twice");
  for (const char* bad : {"0-1", "0.1,", "a.1", "1", "0.1.2", "-1.0", "0. 1", " 0.1"})
    CHECK(ErrorOf(ParseHeadList(bad, 2, 4, "p"))
              .rfind("p: expected LAYER.HEAD (integers or *), got", 0) == 0);
}

TEST_CASE("head modes parse every mode and name a bad item") {
  auto r = ParseHeadModeList("0.1=local:32,1.*=streaming:4:16,1.3=pruned,0.0=ordinary", 2, 4, "f");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 7);
  CHECK((*r)[0].mode == "local");
  CHECK((*r)[0].window == 32);
  CHECK(((*r)[1].mode == "streaming" && (*r)[1].sink == 4 && (*r)[1].recent == 16));
  CHECK(((*r)[5].at.head == 3 && (*r)[5].mode == "pruned"));
  CHECK((*r)[6].mode == "ordinary");
  CHECK((*r)[1].chunk == 0);  // no CHUNK: per-token eviction
  auto chunked = ParseHeadModeList("0.0=streaming:4:16:64", 1, 1, "f");  // AoH §5 per chunk
  REQUIRE(chunked.ok());
  CHECK(((*chunked)[0].recent == 16 && (*chunked)[0].chunk == 64));
  auto error = [](const char* spec) {
    auto m = ParseHeadModeList(spec, 2, 4, "f: $.model.head_modes");
    return m.ok() ? std::string() : m.status().message();
  };
  CHECK(error("9.9=local:16") == "f: $.model.head_modes: head 9.9 is outside the model's 2 x 4");
  CHECK(error("garbage") == "f: $.model.head_modes: expected LAYER.HEAD=MODE, got \"garbage\"");
  for (const char* bad : {"0.0=local:0", "0.0=local", "0.0=streaming:1:0", "0.0=streaming:1:2:0",
                          "0.0=streaming:1:2:3:4", "0.0=fixed", "0.0=pruned:1"})
    CHECK(error(bad).find("mode must be ordinary, pruned, local:W") != std::string::npos);
}

TEST_CASE("with the shape unknown (a checkpoint's), only the syntax is checked") {
  CHECK(ParseHeadList("99.99,*.1", -1, -1, "w").ok());
  CHECK(ParseHeadList("99.99,*.1", -1, -1, "w")->empty());
  CHECK_FALSE(ParseHeadList("x.1", -1, -1, "w").ok());
  CHECK(ParseHeadModeList("40.3=local:8", -1, -1, "w").ok());
  CHECK_FALSE(ParseHeadModeList("40.3=wide", -1, -1, "w").ok());
}

}  // namespace
}  // namespace headlab
