// The token-shard format that `headlab data prepare` writes and exec reads (data.source
// "shards" / "corpus"; schema/exec.md, "Token shards"). Torch-free.
//
//   DIR/train.bin, DIR/val.bin := token[n], little-endian uint16 (vocab <= 65536) or uint32
//   DIR/meta.json := {
//     "format": "headlab-shards/1",
//     "dtype": "uint16" | "uint32",
//     "tokenizer": {"kind": "byte"|"gpt2-bpe"|"hf-bpe", "source": PATH, "sha256": HEX,
//                   "vocab": N, "eot": ID (-1: none), "pattern": REGEX},
//     "train": {"tokens": N, "documents": N}, "val": {"tokens": N, "documents": N},
//     "split": {"by": "document"|"tokens", "val_fraction": F},
//     "corpus": {"format": "text"|"jsonl"|"brown" (several joined by +), "inputs": [STR], "files":
//     N,
//                "documents": N, "skipped": N, "duplicates": N, "bytes": N, "sha256": HEX},
//     "sources": [{"name": STR, "licence": STR, ...}]   (prepare --sources; may be empty)
//     "created_by": "headlab data prepare", "created_at": ISO-8601 UTC
//   }
//   DIR/tokenizer/ := a copy of the tokenizer's files (not for "byte"); "source" is then
//     "tokenizer/<file>", relative to DIR, so the shards work wherever DIR is moved
//     (ReadShardMeta returns it resolved). Shards prepared before this copy existed name
//     the original files by an absolute path.
// Shards without meta.json (nanoGPT's prepare scripts) are read as uint16 with no checks
// beyond the token range.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

inline constexpr const char* kShardFormat = "headlab-shards/1";
// The folder inside DIR that holds the copy of the tokenizer's files.
inline constexpr const char* kShardTokenizerDir = "tokenizer";

struct ShardSplitInfo {
  int64_t tokens = 0;
  int64_t documents = 0;
};

struct ShardMeta {
  std::string dtype = "uint16";
  std::string tokenizer_kind, tokenizer_source, tokenizer_sha256, tokenizer_pattern;
  int64_t vocab = 0;
  int32_t eot = -1;
  ShardSplitInfo train, val;
  std::string split_by = "document";
  double val_fraction = 0;
  std::string corpus_format;
  std::vector<std::string> corpus_inputs;
  int64_t corpus_files = 0, corpus_documents = 0, corpus_skipped = 0, corpus_bytes = 0;
  int64_t corpus_duplicates = 0;  // dropped by prepare --dedup
  Json sources = Json::array();   // where the inputs came from, with their licences
  std::string corpus_sha256;
  std::string created_at;

  // Bytes per token: 2 for uint16, 4 for uint32.
  int token_bytes() const { return dtype == "uint32" ? 4 : 2; }
};

// The default corpus's folder under the headlab binary's directory (scripts/fetch-data.sh).
inline constexpr const char* kDefaultCorpusSubdir = "data/english-gpt2";
// Returns the default corpus's folder: `path` when set, else kDefaultCorpusSubdir beside the
// running binary (data.source "corpus").
std::string DefaultCorpusDir(const std::string& path);

// Returns "uint16" when every id < vocab fits, else "uint32".
std::string DtypeForVocab(int64_t vocab);
Json ShardMetaToJson(const ShardMeta& m);
// Parses meta.json text; errors name `path` and the field.
StatusOr<ShardMeta> ShardMetaFromJson(const std::string& text, const std::string& path);
// Reads DIR/meta.json: NotFound when there is none (legacy shards), else parse errors. A
// relative tokenizer source is returned as DIR/source.
StatusOr<ShardMeta> ReadShardMeta(const std::string& dir);
// Checks that DIR/<split>.bin has exactly the bytes meta.json promises; the error names the
// file, the expected and the actual size (a truncated or replaced shard).
Status CheckShardSize(const std::string& dir, const std::string& split, const ShardMeta& m);

}  // namespace headlab
