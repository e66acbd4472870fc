// Synthetic retrieval sequences mixed into the training data (data.retrieval_fraction,
// data.retrieval_tasks): a model that has seen keys to copy and recall learns the
// retrieval that AoH's passkey test (§6.1, Fig. 4, Fig. 9) measures, which a small model
// trained on plain text alone does not. Torch-free.
//
// Row n of the training stream (counted over every row the sampler has drawn) is synthetic
// iff floor((n + 1) f) > floor(n f), so exactly floor(N f) of the first N rows are; the k-th
// synthetic row (k = floor(n f)) is of task tasks[k % |tasks|] and is drawn from its own
// generator seeded by (seed, k) alone. Each row has context + 1 tokens:
//   passkey  a corpus run, then a passkey prompt of L tokens (passkey_prompts.h: filler,
//            needle at a random depth, question; L uniform in [its minimum, context + 1 -
//            answer]), then the answer's tokens: the eval's prompt format in the model's
//            own tokens
//   copy     a corpus run S of floor((context + 1) / 2) tokens, S again, and one more corpus
//            token when context + 1 is odd (induction over half the context)
//   recall   P = min(64, (context + 1) / 4, vocab / 2) distinct key tokens each followed by
//            its value token, then queries "key value" of those pairs in random order to the
//            end of the row (associative recall; the last token may be a key alone)
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "payload/exec/data.h"
#include "payload/exec/passkey_prompts.h"

namespace headlab {

enum class RetrievalTask { kPasskey, kCopy, kRecall };

// The names of data.retrieval_tasks, indexed by RetrievalTask.
inline constexpr const char* kRetrievalTaskNames[] = {"passkey", "copy", "recall"};

class RetrievalMix {
 public:
  RetrievalMix() = default;  // disabled: fraction 0
  // Parses `tasks` (a comma list of kRetrievalTaskNames, no repeats) for rows of
  // context + 1 tokens under `codec`. InvalidArgument naming data.retrieval_tasks or
  // data.retrieval_fraction when a name is unknown, the list is empty with fraction > 0,
  // fraction is outside [0, 1), or a passkey row cannot fit the context.
  static StatusOr<RetrievalMix> Make(double fraction, const std::string& tasks, int64_t context,
                                     int64_t vocab, uint64_t seed, const PasskeyCodec& codec);

  // Whether global row n is synthetic (above).
  static bool Synthetic(double fraction, int64_t n);
  bool enabled() const { return fraction_ > 0; }
  double fraction() const { return fraction_; }
  const std::vector<RetrievalTask>& tasks() const { return tasks_; }
  // The task of global row n, which must be Synthetic.
  RetrievalTask TaskOf(int64_t n) const;
  // Replaces *row (context + 1 tokens) by global row n's synthetic sequence; its corpus runs
  // come from `split` (size > context + 1).
  void Fill(int64_t n, const TokenSpan& split, std::vector<int64_t>* row) const;

 private:
  void FillPasskey(std::mt19937_64& rng, const TokenSpan& split, std::vector<int64_t>* row) const;
  void FillCopy(std::mt19937_64& rng, const TokenSpan& split, std::vector<int64_t>* row) const;
  void FillRecall(std::mt19937_64& rng, std::vector<int64_t>* row) const;

  double fraction_ = 0;
  std::vector<RetrievalTask> tasks_;
  int64_t context_ = 0, vocab_ = 0;
  uint64_t seed_ = 0;
  PasskeyCodec codec_;
  int64_t passkey_min_ = 0;  // the shortest passkey prompt that holds a filler token
};

}  // namespace headlab
