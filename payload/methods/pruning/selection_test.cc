#include "payload/methods/pruning/selection.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("pruning: a head set parses sorted and refuses bad, repeated or outside heads") {
  auto s = ParseHeadSet("1.2,0.3,1.0", 2, 4, "prune.heads");
  REQUIRE(s.ok());
  CHECK(*s == std::vector<HeadRef>{{0, 3}, {1, 0}, {1, 2}});
  CHECK(ParseHeadSet("", 2, 4, "p")->empty());
  CHECK(ParseHeadSet("1.4", 2, 4, "p").status().message() ==
        "p: head 1.4 is outside the model's 2 x 4");
  CHECK(ParseHeadSet("0.1,0.1", 2, 4, "p").status().message() == "p: head 0.1 listed twice");
  CHECK(!ParseHeadSet("0-1", 2, 4, "p").ok());
  CHECK(!ParseHeadSet("0.1,", 2, 4, "p").ok());
  CHECK(!ParseHeadSet("a.1", 2, 4, "p").ok());
}

TEST_CASE("pruning: PruneCount rounds half up within [0, total]") {
  CHECK(PruneCount(0.25, 144) == 36);
  CHECK(PruneCount(0.25, 10) == 3);  // 2.5 -> 3
  CHECK(PruneCount(0.0, 10) == 0);
  CHECK(PruneCount(1.0, 10) == 10);
}

TEST_CASE("pruning: gate-Taylor normalises within each layer and removes the global lowest") {
  // Layer 0's raw importances are 10x layer 1's; after eq. 19's normalisation they are
  // identical per head, so the raw scale of a layer does not decide.
  std::vector<std::vector<double>> imp = {{30, 40, 0, 0}, {3, 4, 0, 0}};
  // s: layer 0 = {0.6, 0.8, 0, 0}, layer 1 = same. Lowest 3: ties at 0 by layer then head.
  CHECK(GateTaylorSelect(imp, 3) == std::vector<HeadRef>{{0, 2}, {0, 3}, {1, 2}});
  CHECK(GateTaylorSelect(imp, 5) == std::vector<HeadRef>{{0, 2}, {0, 3}, {1, 2}, {1, 3}, {0, 0}});
  // Without normalisation layer 1's head 1 (raw 4) would rank below layer 0's head 0 (raw 30).
  std::vector<std::vector<double>> skew = {{30, 40}, {1, 4}};
  // s: layer 0 = {0.6, 0.8}; layer 1 = {0.243, 0.970}.
  CHECK(GateTaylorSelect(skew, 2) == std::vector<HeadRef>{{1, 0}, {0, 0}});
  CHECK(GateTaylorSelect({{0, 0}, {1, 2}}, 1) == std::vector<HeadRef>{{0, 0}});  // all-zero layer
  CHECK(GateTaylorSelect(imp, 0).empty());
  CHECK(GateTaylorSelect(imp, 100).size() == 8);
}

}  // namespace headlab
