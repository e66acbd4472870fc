// Passkey prompt encoding and batching.
#include "payload/exec/passkey_prompts.h"

#include <cmath>

#include "common/files.h"

namespace headlab {

StatusOr<PasskeyCodec> PasskeyCodec::For(const ModelConfig& m, const ShardMeta* data_meta) {
  PasskeyCodec codec;
  if (m.init_from.empty() && data_meta && data_meta->tokenizer_kind != "byte") {
    StatusOr<Tokenizer> t = Tokenizer::Load(data_meta->tokenizer_source);
    if (!t.ok()) return t.status();
    if (t->sha256() != data_meta->tokenizer_sha256)
      return Status::InvalidArgument(t->source() +
                                     ": the tokenizer changed since the shards were prepared "
                                     "(fingerprint " +
                                     t->sha256().substr(0, 12) + ", meta.json says " +
                                     data_meta->tokenizer_sha256.substr(0, 12) + ")");
    if (t->vocab_size() > m.vocab)
      return Status::InvalidArgument(t->source() + ": the data's tokenizer has " +
                                     std::to_string(t->vocab_size()) +
                                     " tokens, more than model.vocab " + std::to_string(m.vocab));
    codec.tokenizer_ = t.value();
    return codec;
  }
  if (m.init_from.empty()) {
    if (m.vocab < 256)
      return Status::InvalidArgument(
          "passkey prompts are byte-level and need model.vocab >= 256, got " +
          std::to_string(m.vocab));
    return codec;
  }
  const std::string& dir = m.init_from;
  if (!PathExists(dir + "/tokenizer.json") && !PathExists(dir + "/vocab.json") &&
      !PathExists(dir + "/encoder.json"))
    return Status::InvalidArgument(
        dir +
        ": passkey prompts for an imported model need its tokenizer there "
        "(tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe)");
  StatusOr<Tokenizer> t = Tokenizer::Load(dir);
  if (!t.ok()) return t.status();
  if (t->vocab_size() > m.vocab)
    return Status::InvalidArgument(
        t->source() + ": the tokenizer has " + std::to_string(t->vocab_size()) +
        " tokens, more than the model's vocab_size " + std::to_string(m.vocab));
  codec.tokenizer_ = t.value();
  return codec;
}

std::vector<int64_t> PasskeyCodec::Encode(const std::string& text) const {
  std::vector<int32_t> ids;
  tokenizer_.Encode(text, &ids);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

bool PasskeyCodec::Matches(const std::vector<int64_t>& generated, const std::string& answer) const {
  std::vector<int32_t> ids(generated.begin(), generated.end());
  return tokenizer_.Decode(ids) == answer;
}

StatusOr<PasskeyCellPrompts> MakePasskeyPrompts(const PasskeyCodec& codec, int64_t length,
                                                double depth, uint64_t seed, int64_t samples) {
  if (!(depth >= 0 && depth <= 1))
    return Status::InvalidArgument("passkey: depth must be in [0, 1]");
  PasskeyCellPrompts cell;
  std::vector<int64_t> filler;  // the filler's tokens, encoded once per cell
  for (int64_t i = 0; i < samples; ++i) {
    const PasskeyPieces pieces = DrawPasskey(length, seed + uint64_t(i));
    const std::vector<int64_t> needle = codec.Encode(pieces.needle),
                               question = codec.Encode(pieces.question);
    const int64_t n = length - int64_t(needle.size() + question.size());
    if (n < 1)
      return Status::InvalidArgument("passkey: length " + std::to_string(length) +
                                     " tokens is shorter than the needle "
                                     "and question (" +
                                     std::to_string(length - n + 1) + " tokens)");
    // The filler: the first n tokens of enough repeats of its unit (more repeats only append
    // tokens: BPE merges stay inside pre-tokenized words).
    std::string text = pieces.filler_unit;
    while (int64_t(filler.size()) < n) {
      filler = codec.Encode(text);
      text += text;
    }
    const int64_t at = int64_t(std::llround(depth * double(n)));
    std::vector<int64_t> prompt(filler.begin(), filler.begin() + at);
    prompt.insert(prompt.end(), needle.begin(), needle.end());
    prompt.insert(prompt.end(), filler.begin() + at, filler.begin() + n);
    prompt.insert(prompt.end(), question.begin(), question.end());
    const int64_t answer = int64_t(codec.Encode(pieces.answer).size());
    PasskeyGroup* g = nullptr;
    for (PasskeyGroup& x : cell.groups)
      if (x.answer_tokens == answer) g = &x;
    if (!g) {
      cell.groups.emplace_back();
      g = &cell.groups.back();
      g->length = length;
      g->answer_tokens = answer;
    }
    g->examples.push_back(size_t(i));
    g->tokens.insert(g->tokens.end(), prompt.begin(), prompt.end());
    cell.answers.push_back(pieces.answer);
    cell.inserted_at.push_back(at);
  }
  return cell;
}

}  // namespace headlab
