#include "payload/exec/data.h"

#include <cstdio>

#include "common/files.h"
#include "payload/exec/test_util.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

TEST_CASE("data: the builtin corpus is byte-level and split at val_fraction") {
  StatusOr<Dataset> d = LoadBuiltinCorpus(0.1);
  REQUIRE(d.ok());
  CHECK(d->vocab == 256);
  CHECK(d->sha256.size() == 64);
  const int64_t n = d->train.size + d->val.size;
  CHECK(d->val.size == int64_t(double(n) * 0.1));
  CHECK(d->val.data == d->train.data + d->train.size);  // the held-out part is the tail
  StatusOr<Dataset> again = LoadBuiltinCorpus(0.1);
  REQUIRE(again.ok());
  CHECK(again->sha256 == d->sha256);
}

TEST_CASE("data: batches are deterministic per seed, differ across seeds, stay in split") {
  const int64_t context = 16, split = 1000;
  BatchSampler a(5, context), b(5, context), c(6, context);
  std::vector<int64_t> oa, ob, oc;
  for (int i = 0; i < 50; ++i) {
    for (int64_t o : a.NextOffsets(split, 4)) oa.push_back(o);
    for (int64_t o : b.NextOffsets(split, 4)) ob.push_back(o);
    for (int64_t o : c.NextOffsets(split, 4)) oc.push_back(o);
  }
  CHECK(oa == ob);
  CHECK(oa != oc);
  for (int64_t o : oa) {
    CHECK(o >= 0);
    CHECK(o + context < split);  // the window's last (target) token is inside the split
  }
  // Restoring a saved state continues the same sequence.
  BatchSampler d(5, context);
  d.NextOffsets(split, 4);
  BatchSampler e(99, context);
  REQUIRE(e.LoadState(d.SaveState()).ok());
  CHECK(d.NextOffsets(split, 4) == e.NextOffsets(split, 4));
  CHECK(!e.LoadState("garbage").ok());
}

TEST_CASE("data: train and eval windows are disjoint") {
  StatusOr<Dataset> d = LoadBuiltinCorpus(0.1);
  REQUIRE(d.ok());
  const int64_t context = 64;
  BatchSampler s(1, context);
  for (int i = 0; i < 100; ++i)
    for (int64_t o : s.NextOffsets(d->train.size, 8)) REQUIRE(o + context < d->train.size);
  std::vector<int64_t> all;
  for (int64_t b = 0; b < 8; ++b) {
    std::vector<int64_t> offs = EvalOffsets(d->val.size, context, 8, b, 8);
    CHECK(offs == EvalOffsets(d->val.size, context, 8, b, 8));
    all.insert(all.end(), offs.begin(), offs.end());
  }
  for (int64_t o : all) {
    CHECK(o >= 0);
    CHECK(o + context < d->val.size);
  }
  CHECK(std::is_sorted(all.begin(), all.end()));
  CHECK(all.front() == 0);
}

TEST_CASE("data: the calibration split is the training tail that training never samples") {
  StatusOr<Dataset> d = LoadBuiltinCorpus(0.1);
  REQUIRE(d.ok());
  const int64_t n = d->train.size, context = 64;
  const uint16_t* start = d->train.data;
  REQUIRE(HoldOutCalibration(&d.value(), 0.05, context).ok());
  CHECK(d->calib.size == int64_t(double(n) * 0.05));
  CHECK(d->train.size + d->calib.size == n);
  CHECK(d->train.data == start);
  CHECK(d->calib.data == start + d->train.size);        // after the training tokens
  CHECK(d->calib.data + d->calib.size == d->val.data);  // before the reporting split
  BatchSampler s(3, context);                           // training windows stay in train
  for (int i = 0; i < 100; ++i)
    for (int64_t o : s.NextOffsets(d->train.size, 8)) REQUIRE(o + context < d->train.size);
  Dataset small = d.value();
  Status too_small = HoldOutCalibration(&small, 1e-6, context);
  CHECK(too_small.code() == Status::Code::kInvalidArgument);
  CHECK(too_small.message().find("data.calib_fraction") != std::string::npos);
}

TEST_CASE("data: shards are mapped, hashed and range-checked") {
  std::string dir = testing::ScratchPath("headlab_exec_shards_test");
  REQUIRE(MakeDirs(dir).ok());
  std::string train, val;
  for (uint16_t t = 0; t < 300; ++t) train.append(reinterpret_cast<const char*>(&t), 2);
  for (uint16_t t = 0; t < 50; ++t) val.append(reinterpret_cast<const char*>(&t), 2);
  REQUIRE(WriteFileAtomic(dir + "/train.bin", train).ok());
  REQUIRE(WriteFileAtomic(dir + "/val.bin", val).ok());
  StatusOr<Dataset> d = LoadShards(dir, 300);
  REQUIRE(d.ok());
  CHECK(d->train.size == 300);
  CHECK(d->val.size == 50);
  CHECK(d->train.data[299] == 299);
  StatusOr<Dataset> small = LoadShards(dir, 299);
  REQUIRE(!small.ok());
  CHECK(small.status().message().find("token 299") != std::string::npos);
  REQUIRE(WriteFileAtomic(dir + "/val.bin", "abc").ok());
  CHECK(!LoadShards(dir, 300).ok());
  testing::RemoveTree(dir);
  CHECK(!LoadShards(dir, 300).ok());
}

TEST_CASE("data: prepared shards are checked against meta.json (dtype, sizes, tokenizer)") {
  std::string dir = testing::ScratchPath("headlab_exec_meta_shards_test");
  testing::RemoveTree(dir);
  REQUIRE(MakeDirs(dir).ok());
  // uint32 tokens above 65535, as a Llama 3 tokenizer's shards have.
  std::string train, val;
  for (uint32_t t = 0; t < 200; ++t) {
    uint32_t v = 70000 + t;
    train.append(reinterpret_cast<const char*>(&v), 4);
  }
  for (uint32_t t = 0; t < 40; ++t) val.append(reinterpret_cast<const char*>(&t), 4);
  REQUIRE(WriteFileAtomic(dir + "/train.bin", train).ok());
  REQUIRE(WriteFileAtomic(dir + "/val.bin", val).ok());
  ShardMeta m;
  m.dtype = "uint32";
  m.tokenizer_kind = "hf-bpe";
  m.tokenizer_source = "/models/x/tokenizer.json";
  m.tokenizer_sha256 = std::string(64, 'a');
  m.vocab = 128256;
  m.train = {200, 3};
  m.val = {40, 1};
  REQUIRE(WriteFileAtomic(dir + "/meta.json", ShardMetaToJson(m).dump()).ok());
  StatusOr<Dataset> d = LoadShards(dir, 128256);
  INFO(d.status().ToString());
  REQUIRE(d.ok());
  CHECK(d->has_meta);
  CHECK(d->train.size == 200);
  CHECK(d->train.At(199) == 70199);
  std::vector<int64_t> window;
  d->val.Append(3, 4, &window);
  CHECK(window == std::vector<int64_t>{3, 4, 5, 6});
  // The tokenizer's vocabulary must fit the model's.
  StatusOr<Dataset> small = LoadShards(dir, 50304);
  REQUIRE_FALSE(small.ok());
  CHECK(small.status().message() ==
        dir +
            "/meta.json: the shards' tokenizer (hf-bpe from /models/x/tokenizer.json) "
            "has 128256 tokens; model.vocab is 50304 (a model for these shards needs "
            "model.vocab >= 128256)");
  // A truncated shard is named before anything is mapped.
  REQUIRE(WriteFileAtomic(dir + "/val.bin", val.substr(0, 100)).ok());
  StatusOr<Dataset> cut = LoadShards(dir, 128256);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.status().message().find(dir + "/val.bin: 100 bytes, but " + dir +
                                    "/meta.json promises 40 uint32 tokens (160 bytes)") == 0);
  std::remove((dir + "/val.bin").c_str());
  StatusOr<Dataset> gone = LoadShards(dir, 128256);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.status().message().find(dir + "/val.bin: missing") == 0);
  testing::RemoveTree(dir);
  StatusOr<Dataset> corpus = LoadDataSource("corpus", dir, 0.1, 50304);
  REQUIRE_FALSE(corpus.ok());
  CHECK(corpus.status().message().find("the default corpus is not prepared there") !=
        std::string::npos);
}

}  // namespace
}  // namespace headlab
