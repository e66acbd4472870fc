#include "worker/methods/aah/aah_config.h"

#include <catch2/catch.hpp>

namespace headlab::aah {

TEST_CASE("aah config: defaults, regimes and the scaled window set") {
  auto off = AahOptionsFromJson(Json::object(), 4096, 100, "g.jsonc");
  REQUIRE(off.ok());
  CHECK(off->regime == Regime::kOff);

  auto o = AahOptionsFromJson(Json{{"aah", {{"regime", "deep_reuse"}}}}, 4096, 100, "g.jsonc");
  REQUIRE(o.ok());
  CHECK(o->windows == std::vector<int64_t>{512, 1024, 2048, 4096});
  CHECK(o->min_window == 512);
  CHECK(o->hierarchy == std::vector<int64_t>{2, 2, 2, 2});
  CHECK(o->control_every == 5);
  CHECK(o->feature_ema == 0.9);
  CHECK(o->resolution_ema == 0.15);
  CHECK(o->norm_penalty == 16.0);
  CHECK(o->fixed_window == 1024);
  CHECK(o->freeze_step == 100);

  auto small = AahOptionsFromJson(
      Json{{"aah.regime", "shallow_freeze"}, {"aah.control_every", 10}}, 128, 0, "g.jsonc");
  REQUIRE(small.ok());
  CHECK(small->windows == std::vector<int64_t>{16, 32, 64, 128});
  CHECK(small->hierarchy == std::vector<int64_t>{2});
  CHECK(small->control_every == 10);
  CHECK(ScaledWindows(8) == std::vector<int64_t>{1, 2, 4, 8});
}

TEST_CASE("aah config: bad values are InvalidArgument naming the key") {
  auto bad_regime = AahOptionsFromJson(Json{{"aah", {{"regime", "fast"}}}}, 128, 0, "g.jsonc");
  REQUIRE_FALSE(bad_regime.ok());
  CHECK(bad_regime.status().message().find("g.jsonc: $.config.aah.regime: unknown aah regime") == 0);
  auto bad_windows = AahOptionsFromJson(
      Json{{"aah", {{"regime", "full_adaptive"}, {"windows", "64,32"}}}}, 128, 0, "g.jsonc");
  REQUIRE_FALSE(bad_windows.ok());
  CHECK(bad_windows.status().message().find("$.config.aah.windows") != std::string::npos);
  auto too_big = AahOptionsFromJson(
      Json{{"aah", {{"regime", "full_adaptive"}, {"windows", "64,256"}}}}, 128, 0, "g.jsonc");
  CHECK_FALSE(too_big.ok());
  auto bad_type = AahOptionsFromJson(
      Json{{"aah", {{"regime", "full_adaptive"}, {"control_every", "5"}}}}, 128, 0, "g.jsonc");
  CHECK_FALSE(bad_type.ok());
  CHECK(ParseControl("shuffle_post_select").value() == Control::kShufflePostSelect);
  CHECK_FALSE(ParseControl("shuffle").ok());
}

}  // namespace headlab::aah
