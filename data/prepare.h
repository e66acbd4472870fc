// `headlab data prepare`: documents -> token shards (data/shard_meta.h). Torch-free.
//
// Each document is encoded on its own and preceded by the tokenizer's end-of-text token
// when it has one (GPT-2's <|endoftext|> delimits documents, as in nanoGPT's shards).
// Split: a document goes to val iff FNV-1a-64(its bytes) / 2^64 < val_fraction, so the
// split of a document does not depend on the input order or the other documents. When that
// leaves a split without documents (a single document, e.g. stdin), the last val_fraction
// of the token stream is the held-out split instead (meta split.by = "tokens").
// Atomicity: everything is written into OUT.partial-PID and renamed to OUT at the end; an
// interrupted run leaves only that folder (never OUT), a failed one removes it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "data/documents.h"
#include "data/shard_meta.h"

namespace headlab {

struct PrepareOptions {
  std::vector<std::string> inputs;  // folders, globs, files, "-"; "FORMAT:INPUT" overrides
  DocumentFormat format;            // the format of the other inputs
  std::string tokenizer = "byte";   // a Tokenizer::Load spec
  std::string out_dir;
  double val_fraction = 0.05;  // (0, 0.5]
  bool force = false;          // replace an existing shard folder
  // Drop a document whose bytes equal an earlier one's (FNV-1a-64 and length; meta
  // corpus.duplicates counts them): sources that overlap (e.g. one text in two packages)
  // would otherwise land in both splits.
  bool dedup = false;
  // A JSON file: an array of {"name": STR, "licence": STR, ...} objects, copied into
  // meta.json's "sources" (where each input came from and under which licence).
  std::string sources_file;
};

struct PrepareProgress {
  int64_t bytes = 0;         // input bytes read
  int64_t total_bytes = -1;  // -1 when unknown (stdin)
  int64_t tokens = 0;
  int64_t documents = 0;
};

// Writes the shards; returns their meta. `on_progress` (may be empty) is called after each
// input chunk. Errors name the input file or the output folder; no partial OUT is left.
StatusOr<ShardMeta> PrepareShards(const PrepareOptions& o,
                                  const std::function<void(const PrepareProgress&)>& on_progress);

// Removes `path` and everything under it (no-op when absent).
Status RemoveTree(const std::string& path);

}  // namespace headlab
