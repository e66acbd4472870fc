// `headlab data prepare`: splits, counts, hashes, atomic output, errors; Brown stripping.
#include "data/prepare.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/sha256.h"
#include "common/testing/temp_dir.h"
#include "data/shard_meta.h"
#include "data/tokenizer.h"

namespace headlab {
namespace {

// The documented split rule, restated: FNV-1a-64 of the document / 2^64 < val_fraction.
bool InVal(const std::string& doc, double fraction) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : doc) h = (h ^ c) * 1099511628211ull;
  return double(h) / 18446744073709551616.0 < fraction;
}

std::vector<uint16_t> ReadU16(const std::string& path) {
  StatusOr<std::string> b = ReadFile(path);
  REQUIRE(b.ok());
  std::vector<uint16_t> out(b->size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = uint16_t(uint8_t((*b)[2 * i]) | (uint8_t((*b)[2 * i + 1]) << 8));
  return out;
}

std::string Bytes(const std::vector<uint16_t>& tokens) {
  std::string s;
  for (uint16_t t : tokens) s += char(t);
  return s;
}

bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

TEST_CASE("byte-level shards of a folder: document split, counts and corpus hash") {
  testing::TempDir dir("headlab-prep");
  const std::string in = dir.path() + "/in", out = dir.path() + "/shards";
  REQUIRE(MakeDirs(in + "/sub").ok());
  std::vector<std::string> docs;
  for (int i = 0; i < 40; ++i)
    docs.push_back("document " + std::to_string(i) + " says " +
                   std::string(size_t(i % 7 + 1), 'x') + "\n");
  // Sorted path order: in/d00 .. in/d38 (even), then in/sub/d01 .. (odd).
  std::vector<std::string> ordered;
  for (int i = 0; i < 40; i += 2) ordered.push_back(docs[size_t(i)]);
  for (int i = 1; i < 40; i += 2) ordered.push_back(docs[size_t(i)]);
  for (int i = 0; i < 40; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "d%02d", i);
    REQUIRE(WriteFileAtomic(in + (i % 2 ? "/sub/" : "/") + name, docs[size_t(i)]).ok());
  }
  REQUIRE(WriteFileAtomic(in + "/.hidden", "never read").ok());
  REQUIRE(WriteFileAtomic(in + "/empty", "").ok());
  PrepareOptions o;
  o.inputs = {in};
  o.out_dir = out;
  o.val_fraction = 0.25;
  int calls = 0;
  StatusOr<ShardMeta> m = PrepareShards(o, [&](const PrepareProgress& p) {
    ++calls;
    CHECK(p.bytes <= p.total_bytes);
  });
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  CHECK(calls >= 40);
  std::string train, val;
  int64_t n_val = 0;
  Sha256 corpus;
  for (const std::string& d : ordered) {
    uint64_t len = d.size();
    corpus.Update(&len, sizeof len);
    corpus.Update(d);
    if (InVal(d, 0.25)) {
      val += d;
      ++n_val;
    } else {
      train += d;
    }
  }
  REQUIRE(n_val > 0);
  CHECK(Bytes(ReadU16(out + "/train.bin")) == train);
  CHECK(Bytes(ReadU16(out + "/val.bin")) == val);
  CHECK(m->split_by == "document");
  CHECK(m->val.documents == n_val);
  CHECK(m->train.documents == 40 - n_val);
  CHECK(m->corpus_skipped == 1);  // the empty file
  CHECK(m->corpus_files == 41);
  CHECK(m->corpus_sha256 == corpus.HexDigest());
  CHECK(m->tokenizer_kind == "byte");
  CHECK(m->eot == -1);
  StatusOr<ShardMeta> read = ReadShardMeta(out);
  REQUIRE(read.ok());
  CHECK(ShardMetaToJson(read.value()) == ShardMetaToJson(m.value()));
  CHECK(CheckShardSize(out, "train", read.value()).ok());

  SECTION("an existing folder needs --force, and a non-shard folder is never replaced") {
    StatusOr<ShardMeta> again = PrepareShards(o, {});
    REQUIRE_FALSE(again.ok());
    CHECK(again.status().message() == out + ": already exists (--force replaces it)");
    o.force = true;
    REQUIRE(PrepareShards(o, {}).ok());
    o.out_dir = in;
    StatusOr<ShardMeta> clobber = PrepareShards(o, {});
    REQUIRE_FALSE(clobber.ok());
    CHECK(clobber.status().message().find("is not a shard folder") != std::string::npos);
  }
  SECTION("a truncated shard is named with both sizes") {
    StatusOr<std::string> b = ReadFile(out + "/train.bin");
    REQUIRE(WriteFileAtomic(out + "/train.bin", b->substr(0, b->size() - 2)).ok());
    Status st = CheckShardSize(out, "train", read.value());
    CHECK(st.message() == out + "/train.bin: " + std::to_string(b->size() - 2) + " bytes, but " +
                              out + "/meta.json promises " + std::to_string(b->size() / 2) +
                              " uint16 tokens (" + std::to_string(b->size()) +
                              " bytes): truncated or replaced; run `headlab data "
                              "prepare` again");
  }
}

TEST_CASE("--dedup drops repeated documents; --sources lands in meta.json") {
  testing::TempDir dir("headlab-prep-dedup");
  const std::string in = dir.path() + "/in", out = dir.path() + "/shards";
  REQUIRE(MakeDirs(in).ok());
  // 6 files, 4 distinct texts ("alpha text" three times): 2 duplicates.
  const std::vector<std::string> texts = {"alpha text\n", "beta text\n",  "alpha text\n",
                                          "gamma\n",      "alpha text\n", "delta delta\n"};
  for (size_t i = 0; i < texts.size(); ++i)
    REQUIRE(WriteFileAtomic(in + "/f" + std::to_string(i), texts[i]).ok());
  const std::string sources = dir.path() + "/sources.json";
  REQUIRE(WriteFileAtomic(
              sources, R"([{"name": "Test texts", "licence": "public domain", "package": "none"}])")
              .ok());
  PrepareOptions o;
  o.inputs = {in};
  o.out_dir = out;
  o.val_fraction = 0.5;
  o.dedup = true;
  o.sources_file = sources;
  StatusOr<ShardMeta> m = PrepareShards(o, {});
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  CHECK(m->corpus_documents == 4);
  CHECK(m->corpus_duplicates == 2);
  CHECK(m->train.documents + m->val.documents == 4);
  // Tokens: the 4 distinct documents' bytes (no end-of-text token at byte level).
  CHECK(m->train.tokens + m->val.tokens ==
        int64_t(std::string("alpha text\nbeta text\ngamma\ndelta delta\n").size()));
  StatusOr<ShardMeta> back = ReadShardMeta(out);
  REQUIRE(back.ok());
  CHECK(back->corpus_duplicates == 2);
  REQUIRE(back->sources.size() == 1);
  CHECK(back->sources[0]["licence"] == "public domain");
  // Without --dedup every file is a document.
  o.dedup = false;
  o.force = true;
  StatusOr<ShardMeta> all = PrepareShards(o, {});
  REQUIRE(all.ok());
  CHECK(all->corpus_documents == 6);
  CHECK(all->corpus_duplicates == 0);
  // A sources file without a licence is refused, naming the entry.
  REQUIRE(WriteFileAtomic(sources, R"([{"name": "x"}])").ok());
  StatusOr<ShardMeta> bad = PrepareShards(o, {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("$[0].licence") != std::string::npos);
}

TEST_CASE("one document is split by tokens; failures leave no output") {
  testing::TempDir dir("headlab-prep");
  const std::string doc = std::string(1000, 'a') + std::string(1000, 'b');
  REQUIRE(WriteFileAtomic(dir.path() + "/one.txt", doc).ok());
  PrepareOptions o;
  o.inputs = {dir.path() + "/one.txt"};
  o.out_dir = dir.path() + "/out";
  o.val_fraction = 0.1;
  StatusOr<ShardMeta> m = PrepareShards(o, {});
  REQUIRE(m.ok());
  CHECK(m->split_by == "tokens");
  CHECK(Bytes(ReadU16(o.out_dir + "/val.bin")) == doc.substr(1800));
  CHECK(Bytes(ReadU16(o.out_dir + "/train.bin")) == doc.substr(0, 1800));

  o.inputs = {dir.path() + "/missing*.txt"};
  o.out_dir = dir.path() + "/out2";
  StatusOr<ShardMeta> bad = PrepareShards(o, {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("missing*.txt: matches no file") != std::string::npos);
  REQUIRE(WriteFileAtomic(dir.path() + "/bad.jsonl", "{\"text\": \"fine\"}\n{\"body\": 1}\n").ok());
  o.inputs = {"jsonl:" + dir.path() + "/bad.jsonl"};
  bad = PrepareShards(o, {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        dir.path() + "/bad.jsonl:2: expected an object with a string field \"text\"");
  CHECK_FALSE(Exists(o.out_dir));
  CHECK_FALSE(Exists(o.out_dir + ".partial-" + std::to_string(::getpid())));
}

TEST_CASE("GPT-2 shards start each document with <|endoftext|>") {
  const char* env = std::getenv("HEADLAB_GPT2_DIR");
  const std::string gpt2 = env ? env : "data/gpt2";
  testing::TempDir dir("headlab-prep");
  REQUIRE(WriteFileAtomic(dir.path() + "/a.jsonl",
                          "{\"text\": \"Hello world\"}\n{\"text\": \"Hello world\"}\n")
              .ok());
  PrepareOptions o;
  o.inputs = {dir.path() + "/a.jsonl"};
  o.format.format = "jsonl";
  o.tokenizer = gpt2;
  o.out_dir = dir.path() + "/out";
  StatusOr<ShardMeta> m = PrepareShards(o, {});
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  CHECK(m->eot == 50256);
  CHECK(m->dtype == "uint16");
  // Equal documents hash alike: both in one split, so the split falls back to tokens.
  std::vector<uint16_t> all = ReadU16(o.out_dir + "/train.bin"),
                        val = ReadU16(o.out_dir + "/val.bin");
  all.insert(all.end(), val.begin(), val.end());
  CHECK(all == std::vector<uint16_t>{50256, 15496, 995, 50256, 15496, 995});
  // The shards carry their tokenizer: meta.json names the copy relative to the folder, and
  // the copy alone (the original files gone) still encodes as GPT-2 and hashes alike.
  CHECK(m->tokenizer_source == "tokenizer/encoder.json");
  testing::TempDir moved("headlab-prep-moved");
  const std::string there = moved.path() + "/shards";
  REQUIRE(::rename(o.out_dir.c_str(), there.c_str()) == 0);
  StatusOr<ShardMeta> read = ReadShardMeta(there);
  REQUIRE(read.ok());
  CHECK(read->tokenizer_source == there + "/tokenizer/encoder.json");
  StatusOr<Tokenizer> copy = Tokenizer::Load(read->tokenizer_source);
  REQUIRE(copy.ok());
  CHECK(copy->sha256() == read->tokenizer_sha256);
  std::vector<int32_t> ids;
  copy->Encode("Hello world", &ids);
  CHECK(ids == std::vector<int32_t>{15496, 995});
  CHECK(DtypeForVocab(65536) == "uint16");
  CHECK(DtypeForVocab(128256) == "uint32");
}

TEST_CASE("Brown Corpus tags are stripped into running text") {
  CHECK(
      StripBrownTags("\n\n\tThe/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ./.\n\n\tIt/pps "
                     "ended/vbd (/( 1/cd )/) ,/, and/cc 1/2/cd-hl stayed/vbd ./.\n") ==
      "The jury said \"no evidence\". It ended (1), and 1/2 stayed.");
}

}  // namespace
}  // namespace headlab
