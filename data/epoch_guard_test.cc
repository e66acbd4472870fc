#include "data/epoch_guard.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/testing/temp_dir.h"
#include "data/shard_meta.h"

namespace headlab {
namespace {

// A shard folder whose meta.json says `train_tokens` training tokens (byte tokenizer).
void WriteMeta(const std::string& dir, int64_t train_tokens) {
  ShardMeta m;
  m.tokenizer_kind = "byte";
  m.vocab = 256;
  m.train.tokens = train_tokens;
  m.val.tokens = 10;
  m.corpus_format = "text";
  REQUIRE(WriteFileAtomic(dir + "/meta.json", ShardMetaToJson(m).dump()).ok());
}

Json Run(const std::string& dir, int64_t steps, int64_t batch, int64_t context, double calib = 0) {
  return {{"data", {{"source", "shards"}, {"path", dir}, {"calib_fraction", calib}}},
          {"model", {{"context", context}}},
          {"train", {{"steps", steps}, {"batch_size", batch}, {"grad_accum", 2}}}};
}

TEST_CASE("epoch guard: passes = steps x batch x grad_accum x ranks x context / tokens") {
  testing::TempDir tmp;
  WriteMeta(tmp.path(), 1000000);
  // 1000 x 8 x 2 x 1 x 128 = 2,048,000 tokens over 1,000,000: 2.048 passes.
  CHECK(PlannedPasses(Run(tmp.path(), 1000, 8, 128), 1000000) == Approx(2.048));
  CHECK(PlannedPasses(Run(tmp.path(), 1000, 8, 128), 0) == 0);
  CHECK(EpochWarnings({Run(tmp.path(), 1000, 8, 128)}).empty());  // 2.05 <= 4
  // 3000 steps: 6.144 passes; three runs of one grid at the same passes give one line.
  const std::vector<std::string> w =
      EpochWarnings({Run(tmp.path(), 3000, 8, 128), Run(tmp.path(), 3000, 8, 128),
                     Run(tmp.path(), 3000, 8, 128)});
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("3 runs would pass over " + tmp.path()) == 0);
  CHECK(w[0].find("(1,000,000 training tokens) 6.1 times") != std::string::npos);
  // The calibration split shrinks the training tokens: 2.048 / 0.5 = 4.096 passes.
  CHECK(EpochWarnings({Run(tmp.path(), 1000, 8, 128, 0.5)}).size() == 1);
  // Builtin data and folders without meta.json are not checked.
  Json builtin = Run(tmp.path(), 100000, 8, 128);
  builtin["data"]["source"] = "builtin";
  CHECK(EpochWarnings({builtin, Run(tmp.path() + "/none", 100000, 8, 128)}).empty());
}

}  // namespace
}  // namespace headlab
