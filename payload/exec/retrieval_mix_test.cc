#include "payload/exec/retrieval_mix.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "common/metric_names.h"
#include "payload/exec/train_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

// A split of `n` tokens 0, 1, 2, ... (mod 256) held by the returned vector.
TokenSpan Counting(std::vector<uint16_t>* storage, int64_t n) {
  storage->resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) (*storage)[size_t(i)] = uint16_t(i % 256);
  TokenSpan s;
  s.data = storage->data();
  s.size = n;
  return s;
}

RetrievalMix MakeMix(double fraction, const std::string& tasks, int64_t context,
                     int64_t vocab = 256, uint64_t seed = 9) {
  StatusOr<RetrievalMix> m =
      RetrievalMix::Make(fraction, tasks, context, vocab, seed, PasskeyCodec());
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  return m.value();
}

TEST_CASE("retrieval mix: exactly floor(N f) of the first N rows, tasks in turn") {
  for (double f : {0.1, 0.25, 0.5, 1.0 / 3.0}) {
    RetrievalMix m = MakeMix(f, "passkey,copy,recall", 256);
    int64_t synthetic = 0;
    std::map<RetrievalTask, int64_t> per_task;
    for (int64_t n = 0; n < 1200; ++n) {
      if (!RetrievalMix::Synthetic(f, n)) continue;
      ++synthetic;
      ++per_task[m.TaskOf(n)];
    }
    INFO("fraction " << f);
    // 1200 f is an integer for these fractions: 120, 300, 600, 400 synthetic rows.
    CHECK(synthetic == int64_t(1200 * f + 0.5));
    // Round-robin over the three tasks: the k-th synthetic row is task k % 3.
    for (auto [task, count] : per_task) CHECK(count == (synthetic + 2 - int64_t(task)) / 3);
  }
  CHECK_FALSE(RetrievalMix::Synthetic(0.0, 5));
}

TEST_CASE("retrieval mix: the sampler replaces exactly the synthetic rows, by seed alone") {
  std::vector<uint16_t> storage;
  const TokenSpan split = Counting(&storage, 5000);
  const int64_t context = 200;
  RetrievalMix m = MakeMix(0.25, "copy", context);
  BatchSampler plain(3, context), mixed(3, context), again(3, context);
  std::vector<int64_t> a, b, c;
  for (int step = 0; step < 4; ++step) {
    plain.Next(split, 6, &a);
    mixed.Next(split, 6, &b, &m);
    again.Next(split, 6, &c, &m);
  }
  CHECK(b == c);
  CHECK(mixed.rows() == 24);
  const size_t row = size_t(context + 1);
  int64_t replaced = 0;
  for (int64_t n = 0; n < 24; ++n) {
    const bool same =
        std::equal(a.begin() + n * row, a.begin() + (n + 1) * row, b.begin() + n * row);
    CHECK(same == !RetrievalMix::Synthetic(0.25, n));
    replaced += !same;
  }
  CHECK(replaced == 6);
  // A restored state continues the row count (and so the mix).
  BatchSampler resumed(0, context);
  REQUIRE(resumed.LoadState(mixed.SaveState()).ok());
  CHECK(resumed.rows() == 24);
  std::vector<int64_t> x, y;
  mixed.Next(split, 6, &x, &m);
  resumed.Next(split, 6, &y, &m);
  CHECK(x == y);
  // A state saved before the row count existed (the generator alone) loads as row 0.
  std::ostringstream old;
  old << std::mt19937_64(3);
  BatchSampler legacy(0, context);
  REQUIRE(legacy.LoadState(old.str()).ok());
  CHECK(legacy.rows() == 0);
  CHECK_FALSE(legacy.LoadState(old.str() + " rows x").ok());
}

TEST_CASE("retrieval mix: token ids of each task") {
  std::vector<uint16_t> storage;
  const TokenSpan split = Counting(&storage, 5000);
  const int64_t context = 300;
  std::vector<int64_t> row;
  // copy: the second half repeats the first (one corpus token more: context + 1 is odd).
  RetrievalMix copy = MakeMix(0.5, "copy", context);
  copy.Fill(1, split, &row);
  REQUIRE(int64_t(row.size()) == context + 1);
  CHECK(std::equal(row.begin(), row.begin() + 150, row.begin() + 150));
  // A corpus run: consecutive counting tokens.
  for (int i = 1; i < 150; ++i) CHECK(row[size_t(i)] == (row[size_t(i - 1)] + 1) % 256);

  // recall: 64 distinct keys each followed by its value; every later key is followed by the
  // value it was defined with.
  RetrievalMix recall = MakeMix(0.5, "recall", context, 1000);
  recall.Fill(1, split, &row);
  REQUIRE(int64_t(row.size()) == context + 1);
  std::map<int64_t, int64_t> value_of;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < 128; i += 2) {
    value_of[row[i]] = row[i + 1];
    ids.push_back(row[i]);
    ids.push_back(row[i + 1]);
  }
  std::sort(ids.begin(), ids.end());
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());  // 128 distinct tokens
  CHECK(ids.back() < 1000);
  for (size_t i = 128; i + 1 < row.size(); i += 2) {
    REQUIRE(value_of.count(row[i]));
    CHECK(row[i + 1] == value_of[row[i]]);
  }

  // passkey: the prompt's question then the answer end the row (bytes: " NNNNN").
  RetrievalMix passkey = MakeMix(0.5, "passkey", context);
  for (int64_t n : {1, 3, 5}) {
    passkey.Fill(n, split, &row);
    REQUIRE(int64_t(row.size()) == context + 1);
    std::string text;
    for (int64_t t : row) text.push_back(char(t));
    const std::string q = "What is the pass key? The pass key is ";
    const size_t at = text.rfind(q);
    REQUIRE(at == text.size() - q.size() - 5);
    const std::string key = text.substr(at + q.size());
    CHECK(std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }));
    CHECK(text.find("The pass key is " + key + ". Remember it.") != std::string::npos);
  }
  std::vector<int64_t> again;
  passkey.Fill(3, split, &again);
  passkey.Fill(3, split, &row);
  CHECK(again == row);  // deterministic by (seed, row)
}

TEST_CASE("retrieval mix: the training loop draws the mixed rows; a bad task fails the run") {
  // Byte-level builtin corpus, context 200 (a passkey row needs about 100 bytes), 3 updates.
  auto request = [](const std::string& name, double fraction, const std::string& tasks) {
    Json config = {{"seed", 4},
                   {"model", {{"layers", 1}, {"heads", 2}, {"width", 32}, {"context", 200}}},
                   {"data", {{"retrieval_fraction", fraction}, {"retrieval_tasks", tasks}}},
                   {"train",
                    {{"threads", 1},
                     {"batch_size", 4},
                     {"warmup_steps", 1},
                     {"device", "cpu"},
                     {"steps", 3},
                     {"log_every", 1},
                     {"eval_every", 0},
                     {"eval_batches", 1},
                     {"checkpoint_every", 0}}}};
    StatusOr<TrainRequest> r =
        testing::MakeTrainRequest(config, "grid.jsonc", "headlab_retrieval_" + name);
    INFO(r.status().message());
    REQUIRE(r.ok());
    return r.value();
  };
  const TrainRequest plain_req = request("plain", 0, "passkey,copy,recall");
  const TrainRequest mixed_req = request("mixed", 0.5, "passkey,copy,recall");
  testing::TrainEvents plain = testing::CollectTrainingEventsOk(plain_req);
  testing::TrainEvents mixed = testing::CollectTrainingEventsOk(mixed_req);
  // The first update is the same model on different rows (2 of its 4 are synthetic).
  CHECK(plain.metrics[metric::kTrainLoss].at(1) != mixed.metrics[metric::kTrainLoss].at(1));
  Status st;
  testing::CollectTrainingEvents(request("bad", 0.5, "passkey,lookup"), &st);
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("data.retrieval_tasks") != std::string::npos);
  for (const TrainRequest* r : {&plain_req, &mixed_req}) testing::RemoveTree(r->out_dir);
}

TEST_CASE("retrieval mix: bad options are named") {
  const PasskeyCodec bytes;
  auto msg = [&](double f, const std::string& tasks, int64_t context) {
    StatusOr<RetrievalMix> m = RetrievalMix::Make(f, tasks, context, 256, 1, bytes);
    return m.ok() ? std::string() : m.status().message();
  };
  CHECK(msg(0.2, "passkey,lookup", 256).find("data.retrieval_tasks") == 0);
  CHECK(msg(0.2, "copy,copy", 256).find("listed twice") != std::string::npos);
  CHECK(msg(0.2, "", 256).find("data.retrieval_tasks") == 0);
  CHECK(msg(1.0, "copy", 256).find("data.retrieval_fraction") == 0);
  CHECK(msg(0.2, "passkey", 64).find("more than model.context") != std::string::npos);
  CHECK(msg(0.0, "", 64).empty());  // disabled
  CHECK(msg(0.2, " copy , recall", 64).empty());
}

}  // namespace
}  // namespace headlab
