// Byte-level BPE merging.
#include "data/bpe.h"

#include <cstdio>
#include <limits>

namespace headlab {
namespace {

constexpr size_t kCacheEntries = 1 << 16;  // cleared when full: text repeats its words
constexpr size_t kCachedPieceBytes = 64;

std::string Printable(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return "\"" + out + "\"";
}

}  // namespace

StatusOr<BytePairEncoder> BytePairEncoder::Create(
    std::vector<std::string> tokens, const std::vector<std::pair<std::string, std::string>>& merges,
    bool ignore_merges, const std::string& source) {
  BytePairEncoder b;
  b.ignore_merges_ = ignore_merges;
  b.ids_.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].empty()) continue;
    auto [it, inserted] = b.ids_.emplace(tokens[id], int32_t(id));
    if (!inserted)
      return Status::InvalidArgument(source + ": token " + Printable(tokens[id]) +
                                     " has two ids, " + std::to_string(it->second) + " and " +
                                     std::to_string(id));
  }
  for (int c = 0; c < 256; ++c) {
    auto it = b.ids_.find(std::string(1, char(c)));
    if (it == b.ids_.end())
      return Status::InvalidArgument(source + ": byte " + std::to_string(c) +
                                     " has no token (not a byte-level vocabulary)");
    b.byte_ids_[c] = it->second;
  }
  b.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [l, r] = merges[rank];
    auto li = b.ids_.find(l), ri = b.ids_.find(r), mi = b.ids_.find(l + r);
    if (li == b.ids_.end() || ri == b.ids_.end() || mi == b.ids_.end())
      return Status::InvalidArgument(source + ": merge " + std::to_string(rank) + " (" +
                                     Printable(l) + " + " + Printable(r) +
                                     ") names a token the vocabulary lacks");
    // Vocabulary files never repeat a pair, and readers disagree on which rank a repeat
    // would keep: refuse rather than guess.
    if (!b.merges_.emplace(Key(li->second, ri->second), Merge{int32_t(rank), mi->second}).second)
      return Status::InvalidArgument(source + ": merge " + std::to_string(rank) + " (" +
                                     Printable(l) + " + " + Printable(r) +
                                     ") repeats an earlier merge");
    b.merge_ids_.push_back({li->second, ri->second});
  }
  b.tokens_ = std::move(tokens);
  b.cache_.reserve(kCacheEntries);
  return b;
}

void BytePairEncoder::EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    int32_t whole = Find(piece);
    if (whole >= 0) {
      ids->push_back(whole);
      return;
    }
  }
  const bool cacheable = piece.size() <= kCachedPieceBytes;
  if (cacheable) {
    auto it = cache_.find(std::string(piece));
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> word;
  word.reserve(piece.size());
  for (unsigned char c : piece) word.push_back(byte_ids_[c]);
  while (word.size() > 1) {
    // The lowest-ranked adjacent pair.
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    int32_t best_left = -1, best_right = -1, merged = -1;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merges_.find(Key(word[i], word[i + 1]));
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        best_left = word[i];
        best_right = word[i + 1];
        merged = it->second.merged;
      }
    }
    if (merged < 0) break;
    // Every non-overlapping occurrence of that pair, left to right (GPT-2's bpe()).
    size_t out = 0;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == best_left && word[i + 1] == best_right) {
        word[out++] = merged;
        i += 2;
      } else {
        word[out++] = word[i++];
      }
    }
    word.resize(out);
  }
  ids->insert(ids->end(), word.begin(), word.end());
  if (cacheable) {
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::move(word));
  }
}

const std::string& BytePairEncoder::TokenBytes(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && size_t(id) < tokens_.size() ? tokens_[size_t(id)] : kEmpty;
}

int32_t BytePairEncoder::Find(std::string_view bytes) const {
  auto it = ids_.find(std::string(bytes));
  return it == ids_.end() ? -1 : it->second;
}

}  // namespace headlab
