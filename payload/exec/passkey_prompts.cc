// Passkey prompt encoding and batching.
#include "payload/exec/passkey_prompts.h"

#include "common/files.h"

namespace headlab {

StatusOr<PasskeyCodec> PasskeyCodec::For(const ModelConfig& m, const ShardMeta* data_meta) {
  PasskeyCodec codec;
  if (m.init_from.empty() && data_meta && data_meta->tokenizer_kind != "byte") {
    StatusOr<Tokenizer> t = Tokenizer::Load(data_meta->tokenizer_source);
    if (!t.ok()) return t.status();
    if (t->sha256() != data_meta->tokenizer_sha256)
      return Status::InvalidArgument(t->source() + ": the tokenizer changed since the shards were prepared "
                                     "(fingerprint " + t->sha256().substr(0, 12) + ", meta.json says " +
                                     data_meta->tokenizer_sha256.substr(0, 12) + ")");
    if (t->vocab_size() > m.vocab)
      return Status::InvalidArgument(t->source() + ": the data's tokenizer has " + std::to_string(t->vocab_size()) +
                                     " tokens, more than model.vocab " + std::to_string(m.vocab));
    codec.tokenizer_ = t.value();
    return codec;
  }
  if (m.init_from.empty()) {
    if (m.vocab < 256)
      return Status::InvalidArgument("passkey prompts are byte-level and need model.vocab >= 256, got " +
                                     std::to_string(m.vocab));
    return codec;
  }
  const std::string& dir = m.init_from;
  if (!PathExists(dir + "/tokenizer.json") && !PathExists(dir + "/vocab.json") && !PathExists(dir + "/encoder.json"))
    return Status::InvalidArgument(dir + ": passkey prompts for an imported model need its tokenizer there "
                                   "(tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe)");
  StatusOr<Tokenizer> t = Tokenizer::Load(dir);
  if (!t.ok()) return t.status();
  if (t->vocab_size() > m.vocab)
    return Status::InvalidArgument(t->source() + ": the tokenizer has " + std::to_string(t->vocab_size()) +
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

std::vector<PasskeyGroup> GroupPasskeyPrompts(const PasskeyCodec& codec,
                                              const std::vector<PasskeyExample>& examples) {
  std::vector<PasskeyGroup> groups;
  for (size_t i = 0; i < examples.size(); ++i) {
    std::vector<int64_t> prompt = codec.Encode(examples[i].prompt);
    const int64_t answer = int64_t(codec.Encode(examples[i].answer).size());
    PasskeyGroup* g = nullptr;
    for (PasskeyGroup& x : groups)
      if (x.length == int64_t(prompt.size()) && x.answer_tokens == answer) g = &x;
    if (!g) {
      groups.emplace_back();
      g = &groups.back();
      g->length = int64_t(prompt.size());
      g->answer_tokens = answer;
    }
    g->examples.push_back(i);
    g->tokens.insert(g->tokens.end(), prompt.begin(), prompt.end());
  }
  return groups;
}

}  // namespace headlab
