// Synthetic retrieval rows of the training stream.
#include "payload/exec/retrieval_mix.h"

#include <algorithm>
#include <cmath>

#include <sstream>

#include "common/config_key.h"

namespace headlab {
namespace {

// A passkey answer " NNNNN" is at most 6 tokens under any tokenizer (6 bytes).
constexpr int64_t kMaxAnswerTokens = 6;
// The recall task's pair count cap: enough pairs that recall is not memorisable per row.
constexpr int64_t kMaxRecallPairs = 64;

// Appends n corpus tokens from a random offset of `split` to *row.
void CorpusRun(std::mt19937_64& rng, const TokenSpan& split, int64_t n, std::vector<int64_t>* row) {
  if (n <= 0) return;
  const int64_t at = int64_t(rng() % uint64_t(split.size - n));
  split.Append(at, n, row);
}

}  // namespace

StatusOr<RetrievalMix> RetrievalMix::Make(double fraction, const std::string& tasks,
                                          int64_t context, int64_t vocab, uint64_t seed,
                                          const PasskeyCodec& codec) {
  if (!(fraction >= 0 && fraction < 1))
    return Status::InvalidArgument("data.retrieval_fraction: expected a number in [0, 1), got " +
                                   std::to_string(fraction));
  RetrievalMix m;
  m.fraction_ = fraction;
  m.context_ = context;
  m.vocab_ = vocab;
  m.seed_ = seed;
  m.codec_ = codec;
  std::istringstream list(tasks);
  for (std::string name; std::getline(list, name, ',');) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name.empty()) continue;
    StatusOr<RetrievalTask> parsed =
        ParseNamed<RetrievalTask>(kRetrievalTaskNames, name, "data.retrieval_tasks task");
    if (!parsed.ok())
      return Status::InvalidArgument("data.retrieval_tasks: " + parsed.status().message());
    const RetrievalTask t = parsed.value();
    if (std::find(m.tasks_.begin(), m.tasks_.end(), t) != m.tasks_.end())
      return Status::InvalidArgument("data.retrieval_tasks: \"" + name + "\" is listed twice");
    m.tasks_.push_back(t);
  }
  if (fraction > 0 && m.tasks_.empty())
    return Status::InvalidArgument(
        "data.retrieval_tasks: expected at least one task with data.retrieval_fraction > 0");
  if (fraction == 0) return m;
  if (std::find(m.tasks_.begin(), m.tasks_.end(), RetrievalTask::kPasskey) != m.tasks_.end()) {
    // The fixed text's tokens (a probe draw; keys differ by a token at most) plus slack.
    const PasskeyPieces p = DrawPasskey(context, seed);
    m.passkey_min_ = int64_t(codec.Encode(p.needle).size() + codec.Encode(p.question).size()) + 4;
    if (m.passkey_min_ > context + 1 - kMaxAnswerTokens)
      return Status::InvalidArgument(
          "data.retrieval_tasks: a passkey row needs about " +
          std::to_string(m.passkey_min_ + kMaxAnswerTokens) +
          " tokens, more than model.context + 1 = " + std::to_string(context + 1));
  }
  if (std::find(m.tasks_.begin(), m.tasks_.end(), RetrievalTask::kRecall) != m.tasks_.end() &&
      (vocab < 4 || context + 1 < 8))
    return Status::InvalidArgument(
        "data.retrieval_tasks: recall needs model.vocab >= 4 and model.context >= 7");
  return m;
}

bool RetrievalMix::Synthetic(double fraction, int64_t n) {
  return std::floor(double(n + 1) * fraction) > std::floor(double(n) * fraction);
}

RetrievalTask RetrievalMix::TaskOf(int64_t n) const {
  const int64_t k = int64_t(std::floor(double(n) * fraction_));
  return tasks_[size_t(k % int64_t(tasks_.size()))];
}

void RetrievalMix::Fill(int64_t n, const TokenSpan& split, std::vector<int64_t>* row) const {
  const uint64_t k = uint64_t(std::floor(double(n) * fraction_));
  std::seed_seq seq{uint32_t(seed_), uint32_t(seed_ >> 32), uint32_t(k), uint32_t(k >> 32), 0x52u};
  std::mt19937_64 rng(seq);
  row->clear();
  switch (TaskOf(n)) {
    case RetrievalTask::kPasskey:
      FillPasskey(rng, split, row);
      break;
    case RetrievalTask::kCopy:
      FillCopy(rng, split, row);
      break;
    case RetrievalTask::kRecall:
      FillRecall(rng, row);
      break;
  }
}

void RetrievalMix::FillPasskey(std::mt19937_64& rng, const TokenSpan& split,
                               std::vector<int64_t>* row) const {
  const int64_t hi = context_ + 1 - kMaxAnswerTokens;
  int64_t length = passkey_min_ + int64_t(rng() % uint64_t(hi - passkey_min_ + 1));
  const double depth = double(rng() % 1001) / 1000.0;
  const uint64_t key_seed = rng();
  StatusOr<PasskeyCellPrompts> p = MakePasskeyPrompts(codec_, length, depth, key_seed, 1);
  if (!p.ok()) {  // a key whose text is longer than the probe's: the longest prompt fits it
    length = hi;
    p = MakePasskeyPrompts(codec_, length, depth, key_seed, 1);
  }
  const std::vector<int64_t> answer = codec_.Encode(p->answers[0]);
  CorpusRun(rng, split, context_ + 1 - length - int64_t(answer.size()), row);
  const std::vector<int64_t>& prompt = p->groups[0].tokens;
  row->insert(row->end(), prompt.begin(), prompt.end());
  row->insert(row->end(), answer.begin(), answer.end());
}

void RetrievalMix::FillCopy(std::mt19937_64& rng, const TokenSpan& split,
                            std::vector<int64_t>* row) const {
  const int64_t half = (context_ + 1) / 2;
  CorpusRun(rng, split, half, row);
  const std::vector<int64_t> first(row->begin(), row->end());  // (insert may not read *row)
  row->insert(row->end(), first.begin(), first.end());
  CorpusRun(rng, split, context_ + 1 - 2 * half, row);
}

void RetrievalMix::FillRecall(std::mt19937_64& rng, std::vector<int64_t>* row) const {
  const int64_t pairs = std::min({kMaxRecallPairs, (context_ + 1) / 4, vocab_ / 2});
  // 2 * pairs distinct tokens of the vocabulary (by rejection: pairs <= vocab / 2), keys at
  // even indices, their values at odd ones.
  std::vector<int64_t> ids;
  while (int64_t(ids.size()) < 2 * pairs) {
    const int64_t id = int64_t(rng() % uint64_t(vocab_));
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  for (int64_t i = 0; i < pairs; ++i) {
    row->push_back(ids[size_t(2 * i)]);
    row->push_back(ids[size_t(2 * i + 1)]);
  }
  while (int64_t(row->size()) < context_ + 1) {
    const int64_t i = int64_t(rng() % uint64_t(pairs));
    row->push_back(ids[size_t(2 * i)]);
    if (int64_t(row->size()) < context_ + 1) row->push_back(ids[size_t(2 * i + 1)]);
  }
}

}  // namespace headlab
