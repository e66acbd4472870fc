// Passkey prompts (tasks.h, GeneratePasskey) as model tokens: bytes for headlab's
// byte-level models, the imported checkpoint's own tokenizer (model.init_from) otherwise,
// grouped into batches of equal token length. Torch-free; used by the passkey run kind
// (task_eval.cc) and AoH's passkey grid (aoh_eval.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "data/shard_meta.h"
#include "data/tokenizer.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/tasks.h"

namespace headlab {

class PasskeyCodec {
 public:
  // The tokenizer whose ids the model reads: for model.init_from the tokenizer files in
  // that folder (InvalidArgument naming the folder when it has none); else the one that
  // prepared the model's data (`data_meta`, when given and not byte-level; it must still
  // hash as meta.json says); else bytes (model.vocab >= 256 required).
  static StatusOr<PasskeyCodec> For(const ModelConfig& m, const ShardMeta* data_meta);
  PasskeyCodec() = default;  // bytes

  std::vector<int64_t> Encode(const std::string& text) const;
  // Returns true iff `generated` decodes to exactly `answer`.
  bool Matches(const std::vector<int64_t>& generated, const std::string& answer) const;
  const std::string& kind() const { return tokenizer_.kind(); }

 private:
  Tokenizer tokenizer_;
};

// The examples of one batch: equal prompt and answer token lengths.
struct PasskeyGroup {
  std::vector<size_t> examples;  // indices into the cell's examples
  std::vector<int64_t> tokens;   // row-major [examples.size(), length]
  int64_t length = 0;            // prompt tokens
  int64_t answer_tokens = 0;     // tokens to generate (the answer's own encoding)
};

// One length x depth cell of prompts, measured in the model's tokens as AoH §6.1 measures
// context and depth: example i (DrawPasskey(length, seed + i)) is `length` tokens, filler
// tokens with the needle's tokens after round(depth * filler tokens) of them, then the
// question's. The pieces are encoded apart and joined, so every prompt of the cell has
// exactly `length` tokens; for bytes the prompt is GeneratePasskey's (tasks.h).
struct PasskeyCellPrompts {
  std::vector<std::string> answers;  // per example
  std::vector<int64_t> inserted_at;  // per example: the needle's first token
  std::vector<PasskeyGroup> groups;  // by answer token count, in first-seen order
};
// InvalidArgument when `length` cannot hold the needle, the question and one filler token,
// or depth is outside [0, 1].
StatusOr<PasskeyCellPrompts> MakePasskeyPrompts(const PasskeyCodec& codec, int64_t length,
                                                double depth, uint64_t seed, int64_t samples);

}  // namespace headlab
