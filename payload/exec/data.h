// Training data for exec: token sequences (uint16) split into train and held-out parts,
// and the seeded batch sampler. Torch-free so it compiles fast and tests without LibTorch.
//
// Sources (schema/grid.md, data.source):
//   builtin: the text files of /usr/share/common-licenses (Debian's base-files, present on
//            every Debian/Ubuntu host), regular files in sorted filename order,
//            concatenated; byte-level tokens (vocab 256); the last val_fraction of the bytes
//            is the held-out split.
//   shards:  DIR/train.bin and DIR/val.bin, little-endian token ids, memory-mapped: the
//            format of `headlab data prepare` (data/shard_meta.h: DIR/meta.json names the
//            dtype, uint16 or uint32, the tokenizer and the token counts, which are checked),
//            or nanoGPT's uint16 shards without meta.json.
//   corpus:  the default corpus `make` prepares (scripts/fetch-data.sh): shards in
//            data.path, or "" = BUILD/data/english-gpt2 beside the headlab binary.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "data/shard_meta.h"

namespace headlab {

class RetrievalMix;  // retrieval_mix.h

inline constexpr const char* kBuiltinCorpusDir = "/usr/share/common-licenses";

// A read-only run of tokens, uint16 (`data`) or uint32 (`data32`, set instead of `data`);
// `holder` keeps the storage (vector or mapping) alive.
struct TokenSpan {
  std::shared_ptr<const void> holder;
  const uint16_t* data = nullptr;
  const uint32_t* data32 = nullptr;
  int64_t size = 0;
  // Returns token i.
  int64_t At(int64_t i) const { return data32 ? int64_t(data32[i]) : int64_t(data[i]); }
  // Appends tokens [begin, begin + n) to *out.
  void Append(int64_t begin, int64_t n, std::vector<int64_t>* out) const;
};

struct Dataset {
  std::string path;    // the directory the tokens came from
  std::string sha256;  // builtin: of the concatenated bytes; shards: of train.bin + val.bin bytes
  int64_t vocab = 0;   // tokens are < vocab
  TokenSpan train;
  TokenSpan val;
  // The shards' meta.json (prepared shards), or has_meta = false (builtin: the byte
  // tokenizer; nanoGPT shards: unknown tokenizer).
  bool has_meta = false;
  ShardMeta meta;
  TokenSpan calib;  // empty unless HoldOutCalibration split it off the training tokens
};

// Builds the builtin byte-level corpus from the files of `dir`.
StatusOr<Dataset> LoadBuiltinCorpus(double val_fraction,
                                    const std::string& dir = kBuiltinCorpusDir);
// Maps DIR/train.bin and DIR/val.bin; every token must be < vocab. With DIR/meta.json the
// files must hold exactly its token counts and its tokenizer's vocabulary must fit `vocab`;
// errors name the file and what was expected.
StatusOr<Dataset> LoadShards(const std::string& dir, int64_t vocab);
// Loads data.source `source` ("builtin" | "shards" | "corpus") for a model of `vocab`.
StatusOr<Dataset> LoadDataSource(const std::string& source, const std::string& path,
                                 double val_fraction, int64_t vocab);

// Moves the last `fraction` of d's training tokens into d->calib: a calibration split that
// neither the training sampler nor the reporting evaluation reads (data.calib_fraction;
// SAF App. A.1, C.3.1 hold calibration out of both). InvalidArgument when either part would
// hold no more than `context` tokens.
Status HoldOutCalibration(Dataset* d, double fraction, int64_t context);

// Draws training windows of context+1 tokens at uniformly random offsets. Its generator
// (mt19937_64, seeded by the run seed) is separate from model init, so the data order is
// fixed by the seed alone, and its state is saved in checkpoints.
class BatchSampler {
 public:
  BatchSampler(uint64_t seed, int64_t context);

  // Appends batch * (context+1) tokens to *tokens (row-major). Requires
  // split.size > context. With `mix` (retrieval_mix.h), the rows it makes synthetic (by
  // their number in the stream of drawn rows) are its sequences instead; the other rows and
  // the generator's draws are what they would be without it.
  void Next(const TokenSpan& split, int64_t batch, std::vector<int64_t>* tokens,
            const RetrievalMix* mix = nullptr);
  // Rows drawn so far (saved with the state).
  int64_t rows() const { return rows_; }
  // Draws the `batch` window offsets Next would use for a split of `split_size` tokens.
  std::vector<int64_t> NextOffsets(int64_t split_size, int64_t batch);
  // Returns the generator state as text; LoadState restores it exactly.
  std::string SaveState() const;
  Status LoadState(const std::string& state);

 private:
  int64_t context_;
  std::mt19937_64 rng_;
  int64_t rows_ = 0;
};

// Appends fixed evaluation batch `index` of `count`: its windows start at offsets evenly
// spaced over the whole split, the same for every seed, so runs are compared on the same
// tokens. Requires split.size > context.
void EvalBatch(const TokenSpan& split, int64_t context, int64_t batch, int64_t index, int64_t count,
               std::vector<int64_t>* tokens);

// Returns the offsets (first token index) that EvalBatch uses, for tests.
std::vector<int64_t> EvalOffsets(int64_t split_size, int64_t context, int64_t batch, int64_t index,
                                 int64_t count);

}  // namespace headlab
