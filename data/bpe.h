// Byte-level byte-pair encoding (Radford et al. 2019, GPT-2; Sennrich et al. 2016): a piece
// of text (one pre-tokenizer match) starts as one token per byte and repeatedly merges the
// adjacent pair of lowest merge rank, all its non-overlapping occurrences left to right,
// until no ranked pair remains. Torch-free; tokens are raw byte strings here (the
// printable-unicode alphabet of the vocabulary files is undone on load, tokenizer.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace headlab {

class BytePairEncoder {
 public:
  // `tokens`: id -> token bytes ("" for an id not in the vocabulary); every single byte
  // must be a token. `merges`: pairs of token byte strings in rank order (rank 0 first);
  // each pair's concatenation must be a token. `ignore_merges`: a piece that is itself a
  // token is encoded as that token without merging (Llama 3's tokenizer.json).
  // InvalidArgument names `source` and the offending token or merge.
  static StatusOr<BytePairEncoder> Create(
      std::vector<std::string> tokens,
      const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
      const std::string& source);
  BytePairEncoder() = default;

  // Appends the ids of `piece`. Not thread-safe (a cache of recent pieces).
  void EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const;
  // Returns the bytes of token `id` ("" when out of range or unassigned).
  const std::string& TokenBytes(int32_t id) const;
  // Returns the id of a token's bytes, or -1.
  int32_t Find(std::string_view bytes) const;

  int64_t size() const { return int64_t(tokens_.size()); }
  bool ignore_merges() const { return ignore_merges_; }
  // Merges as (left id, right id) in rank order, for fingerprints.
  const std::vector<std::pair<int32_t, int32_t>>& merge_ids() const { return merge_ids_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t Key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t byte_ids_[256] = {};
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<std::pair<int32_t, int32_t>> merge_ids_;
  bool ignore_merges_ = false;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace headlab
