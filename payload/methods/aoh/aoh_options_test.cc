#include "payload/methods/aoh/aoh_options.h"

#include "common/run_config.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aoh {
namespace {

// Normalises a partial run config (as exec receives it), then reads its aoh section.
StatusOr<AohRunConfig> Read(const Json& partial) {
  auto c = NormalizeRunConfig(partial, "g");
  if (!c.ok()) return c.status();
  return AohRunConfigFromJson(*c, "g");
}

TEST_CASE("aoh config: missing section or method none disables AoH") {
  auto r = Read(Json::object());
  REQUIRE(r.ok());
  CHECK_FALSE(r->enabled);
  r = Read(ParseJson(R"({"aoh": {"method": "none", "sparsity": 0.3,
      "passkey_lengths": "64,128", "bench_contexts": "32"}})",
                     "t")
               .value());
  REQUIRE(r.ok());
  CHECK_FALSE(r->enabled);
  // The full-attention arm is evaluated like the others.
  CHECK(r->passkey_lengths == std::vector<int64_t>{64, 128});
  CHECK(r->bench_contexts == std::vector<int64_t>{32});
  CHECK(r->options.rope_max_distance == 0);
  CHECK(r->decode_path == DecodePath::kGraph);  // the schema's default, as the struct's
  CHECK(AohRunConfig{}.decode_path == DecodePath::kGraph);
  CHECK(Read(ParseJson(R"({"aoh": {"decode_path": "fused"}})", "t").value())->decode_path ==
        DecodePath::kFused);
  CHECK(Read(ParseJson(R"({"aoh": {"decode_path": "reference"}})", "t").value())->decode_path ==
        DecodePath::kReference);
  CHECK_FALSE(Read(ParseJson(R"({"aoh": {"decode_path": "fast"}})", "t").value()).ok());
  // Per-chunk eviction by default, with the prefill chunk; token eviction on request.
  CHECK(r->options.eviction_chunk == 512);
  CHECK(Read(ParseJson(R"({"aoh": {"prefill_chunk": 64}})", "t").value())->options.eviction_chunk ==
        64);
  CHECK(Read(ParseJson(R"({"aoh": {"eviction": "token"}})", "t").value())->options.eviction_chunk ==
        0);
  CHECK_FALSE(Read(ParseJson(R"({"aoh": {"eviction": "window"}})", "t").value()).ok());
  CHECK_FALSE(
      Read(ParseJson(R"({"aoh": {"method": "none", "bench_contexts": "x"}})", "t").value()).ok());
  // Without a normalised config the parser says so instead of guessing defaults.
  CHECK_FALSE(AohRunConfigFromJson(Json::object(), "g").ok());
}

TEST_CASE("aoh config: methods, metrics, lists and the Random_avg seed") {
  Json c = ParseJson(R"({"seed": 3, "aoh": {"method": "aoh_rope", "rope_max_distance": 4096,
      "sparsity": 0.75, "metric": "stable_rank", "gqa_agg": "min", "sink": 4, "recent": 128,
      "apply_step": 100, "passkey_lengths": "1024, 2048", "passkey_depths": "0.2,0.8",
      "bench_contexts": "4096"}})",
                     "t")
               .value();
  auto r = Read(c);
  REQUIRE(r.ok());
  CHECK(r->enabled);
  CHECK(r->options.selection == Selection::kAoh);
  CHECK(r->options.rope_max_distance == 4096);
  CHECK(r->options.sparsity == 0.75);
  CHECK(r->options.metric == Metric::kStableRank);
  CHECK(r->options.aggregation == GroupAggregation::kMin);
  CHECK(r->options.sink == 4);
  CHECK(r->options.recent == 128);
  CHECK(r->apply_step == 100);
  CHECK(r->passkey_lengths == std::vector<int64_t>{1024, 2048});
  CHECK(r->passkey_depths == std::vector<double>{0.2, 0.8});
  CHECK(r->bench_contexts == std::vector<int64_t>{4096});
  CHECK(r->options.seed == 3);

  c["aoh"] = {{"method", "random"}, {"random_seed", 2}};
  r = Read(c);
  REQUIRE(r.ok());
  CHECK(r->options.selection == Selection::kRandom);
  CHECK(r->options.seed == 2 * 1000003u + 3);
  CHECK(r->options.rope_max_distance == 0);
  CHECK(r->options.recent == 256);  // paper defaults
  CHECK(r->options.sink == 128);
  c["parent"] = {{"run", 5}, {"step", 0}};  // a continuation draws per parent
  CHECK(Read(c)->options.seed == 2 * 1000003u + 3 + 5 * 7919u);
}

TEST_CASE("aoh config: bad values are errors naming the key") {
  auto bad = [](const char* aoh) {
    auto r = Read(ParseJson(std::string(R"({"aoh": )") + aoh + "}", "t").value());
    REQUIRE_FALSE(r.ok());
    return r.status().message();
  };
  CHECK(bad(R"({"method": "best"})").find("$.aoh.method") != std::string::npos);
  CHECK(bad(R"({"method": "aoh", "metric": "trace"})").find("$.aoh.metric") != std::string::npos);
  CHECK(bad(R"({"method": "aoh", "sparsity": 2})").find("aoh.sparsity") != std::string::npos);
  CHECK(bad(R"({"method": "aoh", "recent": 0})").find("aoh.recent") != std::string::npos);
  CHECK(bad(R"({"method": "aoh", "passkey_lengths": "1,x"})").find("$.aoh.passkey_lengths") !=
        std::string::npos);
  CHECK(bad(R"({"method": "aoh", "sink": "many"})").find("$.aoh.sink") != std::string::npos);
  // The bounds are the schema's: one place (aoh_schema.cc), as the coordinator checks them.
  CHECK(bad(R"({"method": "aoh", "rope_max_distance": 0})") ==
        "g: $.aoh.rope_max_distance: expected an integer in [1, 10000000], got 0");
  CHECK(ParsePositiveIntList("").value().empty());
  CHECK(ParsePositiveIntList(" 3, 4").value() == std::vector<int64_t>{3, 4});
  CHECK_FALSE(ParsePositiveIntList("3,,4").ok());
  CHECK_FALSE(ParseFractionList("1.5").ok());
  CHECK(ParseFractionList(" 0.2,0.8 ").value() == std::vector<double>{0.2, 0.8});
  CHECK_FALSE(ParseFractionList("0.2,").ok());
}

}  // namespace
}  // namespace headlab::aoh
