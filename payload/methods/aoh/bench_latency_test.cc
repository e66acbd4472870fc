#include "payload/methods/aoh/bench_latency.h"

#include "common/metric_names.h"
#include "payload/exec/bench_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("bench-decode honours head states: streaming heads shrink the KV cache") {
  Status st;
  Json decode = {{"bench", {{"lengths", "16,24"}, {"decode_tokens", 4}}}};
  testing::BenchEvents full =
      testing::RunBench(RunBenchDecode, testing::TinyBench("bench-decode", decode), &st);
  REQUIRE(st.ok());
  Json stream = decode;
  stream["model"] = {{"head_modes", "*.0=streaming:2:4,*.1=streaming:2:4"}};
  testing::BenchEvents half =
      testing::RunBench(RunBenchDecode, testing::TinyBench("bench-decode", stream), &st);
  REQUIRE(st.ok());
  CHECK(full.summary.contains("bench.decode_ms_per_token.l24"));
  CHECK(full.summary[metric::kBenchDecodeMsPerToken].get<double>() > 0);
  CHECK(half.summary["bench.kv_bytes.l24"].get<double>() <
        full.summary["bench.kv_bytes.l24"].get<double>());
  REQUIRE(full.artifacts.size() == 1);
  CHECK(full.artifacts[0]["kind"] == "bench_table");
  // Every layer ran the decoder's own cached attention, and provenance says so.
  CHECK(full.provenance["attention_paths"] == Json::object({{"kv_cache_reference", {0, 1}}}));
}

TEST_CASE("bench-prefill: one median per length x batch cell") {
  Status st;
  testing::BenchEvents ev = testing::RunBench(
      RunBenchPrefill,
      testing::TinyBench("bench-prefill",
                         {{"bench", {{"lengths", "8,16"}, {"batch_sizes", "1,2"}}}}),
      &st);
  REQUIRE(st.ok());
  for (const char* k : {"bench.prefill_ms.l8.b1", "bench.prefill_ms.l8.b2",
                        "bench.prefill_ms.l16.b1", "bench.prefill_ms.l16.b2"})
    CHECK(ev.summary[k].get<double>() > 0);
  CHECK(ev.summary[metric::kBenchPrefillMs] == ev.summary["bench.prefill_ms.l8.b1"]);
  // On the CPU both layers run the masked dense reference (no fast path there).
  CHECK(ev.provenance["attention_paths"] == Json::parse(R"({"dense_reference": [0, 1]})"));
}

}  // namespace headlab
