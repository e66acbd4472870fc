// Synthetic evaluation tasks (torch-free): multi-query associative recall (MQAR) and passkey
// retrieval. Both are deterministic per seed and carry their answers so a test can check them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab {

// Ignored target (no loss, no accuracy) at a position.
inline constexpr int64_t kNoTarget = -1;

// One MQAR sequence (SAF App. C.3.6 after the Zoology generator; Arora et al., 2024):
//   positions [0, 2k): k key/value pairs, keys from [1, vocab/2), values from
//   [vocab/2, vocab), all distinct; the rest: random tokens, except that each key appears
//   once more as a query at context position 2k + 2*gap, gaps drawn without replacement
//   from [0, (T-2k)/2) with P(gap = i-1) ∝ power_a * i^(power_a-1) (short gaps likelier).
// targets[p] is the value the model must predict after reading the query at p, else
// kNoTarget. Loss and accuracy are measured at those positions only.
struct MqarExample {
  std::vector<int64_t> tokens;   // [T]
  std::vector<int64_t> targets;  // [T]
};

struct MqarSpec {
  int64_t vocab = 8192;
  int64_t seq_len = 512;
  int64_t pairs = 8;
  double power_a = 0.01;
};

// Checks a spec: even seq_len, vocab > seq_len, 4 * pairs <= seq_len, pairs >= 1.
Status ValidateMqar(const MqarSpec& spec);
// Generates example `index` of the set `seed` (examples are independent of each other, so
// any subset can be generated alone). Requires ValidateMqar(spec).ok().
MqarExample GenerateMqar(const MqarSpec& spec, uint64_t seed, uint64_t index);

// One passkey-retrieval prompt (AoH §3): filler text of exactly `length` bytes with the
// sentence "The pass key is N. Remember it. N is the pass key." inserted at `depth` (0..1)
// of the filler, ending in "What is the pass key? The pass key is"; the answer is " N"
// (N: 5 digits). Byte-level tokens (vocab 256).
struct PasskeyExample {
  std::string prompt;  // exactly `length` bytes
  std::string answer;  // " N"
  int64_t inserted_at = 0;
};

// Requires length >= the fixed text (about 130 bytes); returns InvalidArgument otherwise.
StatusOr<PasskeyExample> GeneratePasskey(int64_t length, double depth, uint64_t seed);

// The texts of the passkey prompt drawn from (seed, length): GeneratePasskey joins them in
// bytes, MakePasskeyPrompts (passkey_prompts.h) in a tokenizer's tokens.
struct PasskeyPieces {
  std::string needle;       // "The pass key is N. Remember it. N is the pass key. "
  std::string question;     // "What is the pass key? The pass key is"
  std::string answer;       // " N"
  std::string filler_unit;  // the filler repeats this sentence group
};
PasskeyPieces DrawPasskey(int64_t length, uint64_t seed);

}  // namespace headlab
