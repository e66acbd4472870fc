#include "payload/exec/bench_settings.h"

#include "common/run_config.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

StatusOr<BenchSettings> Settings(const Json& overrides) {
  Json config = {{"model", {{"layers", 2}, {"heads", 4}, {"width", 32}, {"context", 64}}},
                 {"train", {{"batch_size", 3}}}};
  config.merge_patch(overrides);
  StatusOr<Json> normalized = NormalizeRunConfig(config, "t.json");
  REQUIRE(normalized.ok());
  StatusOr<ExecConfig> exec = ExecConfigFromJson(*normalized, "t.json");
  REQUIRE(exec.ok());
  return BenchSettingsFromJson(*normalized, *exec, "t.json");
}

}  // namespace

TEST_CASE("bench settings: defaults come from the model and training config") {
  auto s = Settings(Json::object());
  REQUIRE(s.ok());
  CHECK(s->warmup == 3);
  CHECK(s->repeats == 10);
  CHECK(s->lengths == std::vector<int64_t>{64});
  CHECK(s->batch_sizes == std::vector<int64_t>{3});
  CHECK(s->decode_batch_sizes == std::vector<int64_t>{1});  // bench-decode: one sequence
  CHECK(s->fixed_heads.empty());
}

TEST_CASE("bench settings: lists, fixed heads with wildcards, errors name the key") {
  auto s = Settings(
      {{"bench", {{"lengths", "16,32"}, {"batch_sizes", "1,8"}, {"fixed_heads", "0.1,1.*"}}}});
  REQUIRE(s.ok());
  CHECK(s->lengths == std::vector<int64_t>{16, 32});
  CHECK(s->batch_sizes == std::vector<int64_t>{1, 8});
  CHECK(s->decode_batch_sizes == std::vector<int64_t>{1, 8});
  REQUIRE(s->fixed_heads.size() == 5);  // 0.1 and 1.0-1.3
  CHECK(s->fixed_heads[0].layer == 0);
  CHECK(s->fixed_heads[0].head == 1);
  CHECK(s->fixed_heads[4].layer == 1);
  CHECK(s->fixed_heads[4].head == 3);
  auto bad = Settings({{"bench", {{"lengths", "16,x"}}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("t.json: $.config.bench.lengths") == 0);
  auto too_long = Settings({{"bench", {{"lengths", "65"}}}});  // learned positions, context 64
  REQUIRE_FALSE(too_long.ok());
  CHECK(too_long.status().message().find("exceeds model.context 64") != std::string::npos);
  // A head outside the model is refused with the config, at submit (common/head_list.h).
  Json bad_head = {{"model", {{"layers", 2}, {"heads", 4}, {"width", 32}, {"context", 64}}},
                   {"bench", {{"fixed_heads", "0.9"}}}};
  CHECK(NormalizeRunConfig(bad_head, "t.json").status().message() ==
        "t.json: $.bench.fixed_heads: head 0.9 is outside the model's 2 x 4");
  CHECK_FALSE(ParsePositiveList("1,,2", 5, "w").ok());
  CHECK_FALSE(ParsePositiveList("0", 5, "w").ok());
  CHECK(*ParsePositiveList("", 5, "w") == std::vector<int64_t>{5});
}

}  // namespace headlab
