// Training data for exec: token sequences (uint16) split into train and held-out parts,
// and the seeded batch sampler. Torch-free so it compiles fast and tests without LibTorch.
//
// Sources (schema/grid.md, data.source):
//   builtin: the text files of /usr/share/common-licenses (Debian's base-files, present on
//            every Debian/Ubuntu host), regular files in sorted filename order,
//            concatenated; byte-level tokens (vocab 256); the last val_fraction of the bytes
//            is the held-out split.
//   shards:  nanoGPT-style DIR/train.bin and DIR/val.bin, little-endian uint16 tokens,
//            memory-mapped.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab {

inline constexpr const char* kBuiltinCorpusDir = "/usr/share/common-licenses";

// A read-only run of tokens; `holder` keeps the storage (vector or mapping) alive.
struct TokenSpan {
  std::shared_ptr<const void> holder;
  const uint16_t* data = nullptr;
  int64_t size = 0;
};

struct Dataset {
  std::string path;    // the directory the tokens came from
  std::string sha256;  // builtin: of the concatenated bytes; shards: of train.bin + val.bin bytes
  int64_t vocab = 0;   // tokens are < vocab
  TokenSpan train;
  TokenSpan val;
};

// Builds the builtin byte-level corpus from the files of `dir`.
StatusOr<Dataset> LoadBuiltinCorpus(double val_fraction, const std::string& dir = kBuiltinCorpusDir);
// Maps DIR/train.bin and DIR/val.bin; every token must be < vocab.
StatusOr<Dataset> LoadShards(const std::string& dir, int64_t vocab);

// Draws training windows of context+1 tokens at uniformly random offsets. Its generator
// (mt19937_64, seeded by the run seed) is separate from model init, so the data order is
// fixed by the seed alone, and its state is saved in checkpoints.
class BatchSampler {
 public:
  BatchSampler(uint64_t seed, int64_t context);

  // Appends batch * (context+1) tokens to *tokens (row-major). Requires
  // split.size > context.
  void Next(const TokenSpan& split, int64_t batch, std::vector<int64_t>* tokens);
  // Draws the `batch` window offsets Next would use for a split of `split_size` tokens.
  std::vector<int64_t> NextOffsets(int64_t split_size, int64_t batch);
  // Returns the generator state as text; LoadState restores it exactly.
  std::string SaveState() const;
  Status LoadState(const std::string& state);

 private:
  int64_t context_;
  std::mt19937_64 rng_;
};

// Appends fixed evaluation batch `index` of `count`: its windows start at offsets evenly
// spaced over the whole split, the same for every seed, so runs are compared on the same
// tokens. Requires split.size > context.
void EvalBatch(const TokenSpan& split, int64_t context, int64_t batch, int64_t index,
               int64_t count, std::vector<int64_t>* tokens);

// Returns the offsets (first token index) that EvalBatch uses, for tests.
std::vector<int64_t> EvalOffsets(int64_t split_size, int64_t context, int64_t batch,
                                 int64_t index, int64_t count);

}  // namespace headlab
