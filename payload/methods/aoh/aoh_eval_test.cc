#include "payload/methods/aoh/aoh_eval.h"

#include <cmath>

#include "payload/exec/tasks.h"
#include "payload/methods/aoh/aoh_model.h"
#include "payload/methods/aoh/aoh_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aoh {
namespace {

// A byte-level tiny model long enough for the shortest passkey prompts.
ModelConfig ByteModel() {
  ModelConfig m = TinyModelConfig("rope", 4, 2, 200);
  m.vocab = 256;
  return m;
}

TEST_CASE("aoh eval: passkey cells agree with greedy decoding by full forwards") {
  torch::manual_seed(31);
  Gpt model(ByteModel());
  torch::NoGradGuard no_grad;
  PasskeyOptions p;
  p.lengths = {150};
  p.depths = {0.25, 0.75};
  p.samples = 2;
  p.seed = 5;
  auto cells = PasskeyAccuracy(*model, decode::DecoderOptions{}, p);
  REQUIRE(cells.ok());
  REQUIRE(cells->size() == 2);
  for (size_t c = 0; c < 2; ++c) {
    const PasskeyCell& cell = (*cells)[c];
    CHECK(cell.length == 150);
    CHECK(cell.samples == 2);
    // Reference: greedy continuation by re-running the whole sequence each token.
    int64_t correct = 0;
    for (int64_t i = 0; i < 2; ++i) {
      auto ex = GeneratePasskey(150, p.depths[c], p.seed + uint64_t(i));
      REQUIRE(ex.ok());
      std::vector<int64_t> seq;
      for (unsigned char ch : ex->prompt) seq.push_back(ch);
      std::string got;
      for (size_t k = 0; k < ex->answer.size(); ++k) {
        torch::Tensor logits = model->forward(torch::tensor(seq, torch::kLong).unsqueeze(0));
        int64_t next = logits[0][int64_t(seq.size()) - 1].argmax().item<int64_t>();
        got.push_back(char(next));
        seq.push_back(next);
      }
      correct += got == ex->answer;
    }
    CHECK(cell.correct == correct);
  }
  CHECK(MeanPasskeyAccuracy(cells.value()) >= 0);
  CHECK(PasskeyJson(cells.value())[1]["depth"] == 0.75);

  Gpt small(TinyModelConfig("rope"));  // vocab 32: not byte-level
  CHECK_FALSE(PasskeyAccuracy(*small, decode::DecoderOptions{}, p).ok());
}

TEST_CASE("aoh eval: perplexity through the cache equals exp(model loss), with and without AoH") {
  torch::manual_seed(32);
  Gpt model(TinyModelConfig("learned", 4, 4, 24));
  torch::NoGradGuard no_grad;
  torch::Tensor windows = torch::randint(0, 32, {5, 25}, torch::kLong);
  torch::Tensor x = windows.narrow(1, 0, 24), y = windows.narrow(1, 1, 24);
  decode::DecoderOptions d;
  d.prefill_chunk = 7;
  auto full = Perplexity(*model, d, windows, 2);
  REQUIRE(full.ok());
  CHECK(full->tokens == 5 * 24);
  CHECK(full->loss == Approx(model->Loss(x, y).item<double>()).epsilon(1e-5));

  AohOptions o;
  o.sink = 1;
  o.recent = 4;
  ApplyPlan(*model, PlanAoh(*model, o).value());
  auto aoh = Perplexity(*model, d, windows, 2);
  REQUIRE(aoh.ok());
  CHECK(aoh->loss == Approx(model->Loss(x, y).item<double>()).epsilon(1e-5));
  CHECK(aoh->kv_bytes < full->kv_bytes);
  CHECK(std::abs(aoh->ppl - std::exp(aoh->loss)) < 1e-9 * aoh->ppl);
  CHECK_FALSE(Perplexity(*model, d, torch::zeros({2, 40}, torch::kLong), 2).ok());  // > context
}

TEST_CASE("aoh eval: latency rows carry KV bytes and the device label") {
  torch::manual_seed(33);
  Gpt model(TinyModelConfig("rope", 4, 4, 64));
  torch::NoGradGuard no_grad;
  BenchOptions b;
  b.contexts = {16, 40};
  b.decode_tokens = 4;
  b.repeats = 1;
  b.warmup = 0;
  auto full = BenchmarkLatency(*model, decode::DecoderOptions{}, b);
  REQUIRE(full.ok());
  REQUIRE(full->size() == 2);
  const BenchRow& r = (*full)[1];
  CHECK(r.context == 40);
  CHECK(r.prefill_s > 0);
  CHECK(r.decode_ms_per_token > 0);
  CHECK(r.kv_bytes_prefill == 2 * 2 * 4 * 40 * 8 * 4);  // layers, K/V, kv heads, T, d, fp32
  CHECK(r.kv_bytes_decode == 2 * 2 * 4 * 44 * 8 * 4);
  CHECK(r.device.rfind("cpu (", 0) == 0);
  AohOptions o;
  o.sink = 2;
  o.recent = 6;
  ApplyPlan(*model, PlanAoh(*model, o).value());
  auto aoh = BenchmarkLatency(*model, decode::DecoderOptions{}, b);
  REQUIRE(aoh.ok());
  // Half the KV heads keep 2 + 6 - 1 entries instead of 44.
  CHECK((*aoh)[1].kv_bytes_decode == 2 * 2 * (2 * 44 + 2 * 7) * 8 * 4);
  CHECK(BenchJson(aoh.value())[0]["context"] == 16);
  // Batch sizes: a row per (context, batch), the cache B times the bytes.
  b.contexts = {40};
  b.batch_sizes = {1, 3};
  auto batched = BenchmarkLatency(*model, decode::DecoderOptions{}, b);
  REQUIRE(batched.ok());
  REQUIRE(batched->size() == 2);
  CHECK((*batched)[1].batch == 3);
  CHECK((*batched)[1].kv_bytes_decode == 3 * (*batched)[0].kv_bytes_decode);
  CHECK(BenchJson(batched.value())[1]["batch"] == 3);
  b.repeats = 0;
  CHECK_FALSE(BenchmarkLatency(*model, decode::DecoderOptions{}, b).ok());
}

}  // namespace
}  // namespace headlab::aoh
