#include "payload/methods/aah/aah_options.h"

#include "common/run_config.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aah {
namespace {

// Normalises a partial run config (as exec receives it), then reads its aah section.
StatusOr<AahOptions> Read(const Json& partial, int64_t context, int64_t warmup) {
  auto c = NormalizeRunConfig(partial, "g.jsonc");
  if (!c.ok()) return c.status();
  return AahOptionsFromJson(*c, context, warmup, "g.jsonc");
}

}  // namespace

TEST_CASE("aah config: defaults, regimes and the scaled window set") {
  auto off = Read(Json::object(), 4096, 100);
  REQUIRE(off.ok());
  CHECK(off->regime == Regime::kOff);

  auto o = Read(Json{{"aah", {{"regime", "deep_reuse"}}}}, 4096, 100);
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

  auto small = Read(Json{{"aah.regime", "shallow_freeze"}, {"aah.control_every", 10}}, 128, 0);
  REQUIRE(small.ok());
  CHECK(small->windows == std::vector<int64_t>{16, 32, 64, 128});
  CHECK(small->hierarchy == std::vector<int64_t>{2});
  CHECK(small->control_every == 10);
  CHECK(ScaledWindows(8) == std::vector<int64_t>{1, 2, 4, 8});
}

TEST_CASE("aah config: bad values are InvalidArgument naming the key") {
  // Names and ranges are the schema's (aah_schema.cc), checked at submit.
  auto bad_regime = Read(Json{{"aah", {{"regime", "fast"}}}}, 128, 0);
  REQUIRE_FALSE(bad_regime.ok());
  CHECK(bad_regime.status().message().rfind(
            "g.jsonc: $.aah.regime: expected one of \"off\", \"full\"", 0) == 0);
  CHECK(Read(Json{{"aah", {{"feature_ema", 1.0}}}}, 128, 0).status().message() ==
        "g.jsonc: $.aah.feature_ema: expected a number in [0, 1), got 1.0");
  auto bad_windows =
      Read(Json{{"aah", {{"regime", "full_adaptive"}, {"windows", "64,32"}}}}, 128, 0);
  REQUIRE_FALSE(bad_windows.ok());
  CHECK(bad_windows.status().message().find("$.config.aah.windows") != std::string::npos);
  auto too_big = Read(Json{{"aah", {{"regime", "full_adaptive"}, {"windows", "64,256"}}}}, 128, 0);
  CHECK_FALSE(too_big.ok());
  auto bad_type =
      Read(Json{{"aah", {{"regime", "full_adaptive"}, {"control_every", "5"}}}}, 128, 0);
  CHECK_FALSE(bad_type.ok());
  CHECK(ParseControl("shuffle_post_select").value() == Control::kShufflePostSelect);
  CHECK_FALSE(ParseControl("shuffle").ok());
}

TEST_CASE("aah options: the struct's initialisers are the schema's defaults") {
  auto r = Read(Json{{"aah", {{"regime", "full"}}}}, 4096, 0);
  REQUIRE(r.ok());
  const AahOptions d;
  CHECK(r->control == d.control);
  CHECK(r->control_every == d.control_every);
  CHECK(r->feature_ema == d.feature_ema);
  CHECK(r->resolution_ema == d.resolution_ema);
  CHECK(r->resolution_state == d.resolution_state);
  CHECK(r->norm_penalty == d.norm_penalty);
  CHECK(r->cluster_threshold == d.cluster_threshold);
  CHECK(r->scorer_hidden == d.scorer_hidden);
  CHECK(r->cache_step == d.cache_step);
  CHECK(r->observe_rows == d.observe_rows);
  // Without a normalised config the parser says so instead of guessing defaults.
  CHECK(!AahOptionsFromJson(Json::object(), 4096, 0, "g").ok());
}

}  // namespace headlab::aah
