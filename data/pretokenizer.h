// The pre-tokenizer of byte-level BPE: a regular expression splits text into pieces that
// BPE encodes independently (GPT-2's pattern, and the Split patterns of Hugging Face
// tokenizer.json files: Llama 3 / cl100k, Qwen 2 and 3). Torch-free.
//
// Supported pattern syntax (what those patterns use; anything else is InvalidArgument):
//   alternation |, groups ( ), (?: ), (?i: ) (case-insensitive, Unicode simple folding of
//   ASCII letters), negative/positive lookahead (?! ) (?= ), quantifiers ? * + {n} {n,}
//   {n,m} (greedy), classes [...] and [^...] with ranges, \p{L} \p{N} \P{L} \P{N} \s \S,
//   escapes \r \n \t \f \v and escaped punctuation, '.' (any code point but \n), literal
//   characters. Not supported (refused by name): anchors, backreferences, lazy and
//   possessive quantifiers, \d \w \b, other \p{...} categories.
// Matching is leftmost-first with backtracking (Perl/Oniguruma/fancy-regex semantics), over
// code points; a byte of invalid UTF-8 is one code point in no class (data/unicode.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "data/unicode.h"

namespace headlab {

// GPT-2's pattern (openai/gpt-2 encoder.py), also used by tokenizer.json files whose
// ByteLevel pre-tokenizer has use_regex: true.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  // Compiles `pattern`; InvalidArgument names the offset and what is unsupported.
  static StatusOr<PreTokenizer> Compile(const std::string& pattern);
  PreTokenizer() = default;

  // Appends the pieces of `text` as byte ranges [first, second): every match and every gap
  // between matches, in order, so the pieces cover `text` exactly (HF Split "Isolated").
  void Split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>* pieces) const;
  // The same on text already decoded by DecodeUtf8.
  void Split(const DecodedText& text, std::vector<std::pair<uint32_t, uint32_t>>* pieces) const;

  const std::string& pattern() const { return pattern_; }

  // One set of code points (a class, a literal, '.').
  struct CharSet {
    bool negate = false;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    uint8_t classes = 0;      // kLetter | kNumber | kSpace: matches members
    uint8_t not_classes = 0;  // matches non-members (\S, \P{L})
    uint64_t latin1[4] = {};  // Matches() of code points < 256, precomputed by Finish()
    bool Matches(uint32_t cp) const {
      return cp < 256 ? (latin1[cp >> 6] >> (cp & 63)) & 1 : MatchesSlow(cp);
    }
    bool MatchesSlow(uint32_t cp) const;
    void Finish();
  };
  enum Op : uint8_t { kSet, kSplit, kJmp, kNotAhead, kAhead, kMatch };
  struct Inst {
    Op op;
    int32_t x = 0, y = 0;  // kSet: set index; kSplit: preferred x, then y; kJmp: x;
                           // k(Not)Ahead: x = sub-program index
  };
  using Program = std::vector<Inst>;

 private:
  // Returns the end (code point index) of the leftmost-first match of program `prog` at
  // `start`, or -1.
  int64_t MatchAt(int32_t prog, const std::vector<uint32_t>& cp, int64_t start) const;

  std::string pattern_;
  std::vector<CharSet> sets_;
  std::vector<Program> programs_;  // [0] = the pattern, then lookahead bodies
};

}  // namespace headlab
