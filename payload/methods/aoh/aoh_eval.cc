// Passkey retrieval, perplexity and latency/KV-memory measurement through decode::KvDecoder.
#include "payload/methods/aoh/aoh_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <torch/cuda.h>

#include "payload/exec/passkey_prompts.h"
#include "payload/exec/tasks.h"

namespace headlab::aoh {
namespace {

torch::Device ModelDevice(GptImpl& model) { return model.wte->weight.device(); }

void Sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

std::string DeviceLabel(const torch::Device& device) {
  if (device.is_cuda()) return "cuda:" + std::to_string(device.has_index() ? device.index() : 0);
  return "cpu (" + std::to_string(torch::get_num_threads()) + " threads)";
}

StatusOr<std::vector<PasskeyCell>> PasskeyAccuracy(GptImpl& model,
                                                   const decode::DecoderOptions& decoder,
                                                   const PasskeyOptions& options) {
  const ModelConfig& c = model.config();
  const PasskeyCodec* codec = &options.codec;
  if (codec->kind() == "byte" && c.vocab < 256)
    return Status::InvalidArgument("passkey needs a byte-level vocabulary (>= 256), got " +
                                   std::to_string(c.vocab));
  if (options.samples < 1) return Status::InvalidArgument("passkey samples: expected >= 1");
  const torch::Device dev = ModelDevice(model);
  auto made = decode::KvDecoder::Create(&model, decoder);
  if (!made.ok()) return made.status();
  decode::KvDecoder& d = *made.value();
  std::vector<PasskeyCell> cells;
  for (int64_t length : options.lengths) {
    for (double depth : options.depths) {
      PasskeyCell cell;
      cell.length = length;
      cell.depth = depth;
      cell.samples = options.samples;
      auto prompts = MakePasskeyPrompts(*codec, length, depth, options.seed, options.samples);
      if (!prompts.ok()) return prompts.status();
      for (const PasskeyGroup& g : prompts->groups) {
        if (c.pos == "learned" && g.length + g.answer_tokens - 1 > c.context)
          return Status::InvalidArgument("passkey length " + std::to_string(length) +
                                         " tokens plus its answer exceeds model.context " +
                                         std::to_string(c.context));
        const int64_t n = int64_t(g.examples.size());
        torch::Tensor tokens = torch::tensor(g.tokens, torch::kLong).view({n, g.length}).to(dev);
        d.Reset();
        torch::Tensor next;
        d.Prefill(
            tokens,
            [&](int64_t, const torch::Tensor& logits) {
              next = logits.select(1, logits.size(1) - 1).argmax(-1);
            },
            /*last_only=*/true);
        std::vector<torch::Tensor> generated = {next};
        for (int64_t k = 1; k < g.answer_tokens; ++k) {
          next = d.Step(next).argmax(-1);  // greedy (AoH §6.1)
          generated.push_back(next);
        }
        torch::Tensor got = torch::stack(generated, 1).cpu().contiguous();  // [n, answer tokens]
        for (int64_t i = 0; i < n; ++i) {
          std::vector<int64_t> ids(got[i].data_ptr<int64_t>(),
                                   got[i].data_ptr<int64_t>() + g.answer_tokens);
          cell.correct += codec->Matches(ids, prompts->answers[g.examples[size_t(i)]]);
        }
      }
      cells.push_back(cell);
    }
  }
  return cells;
}

double MeanPasskeyAccuracy(const std::vector<PasskeyCell>& cells) {
  int64_t correct = 0, samples = 0;
  for (const PasskeyCell& c : cells) {
    correct += c.correct;
    samples += c.samples;
  }
  return samples ? double(correct) / double(samples) : 0.0;
}

Json PasskeyJson(const std::vector<PasskeyCell>& cells) {
  Json out = Json::array();
  for (const PasskeyCell& c : cells)
    out.push_back({{"length", c.length},
                   {"depth", c.depth},
                   {"samples", c.samples},
                   {"correct", c.correct},
                   {"accuracy", c.accuracy()}});
  return out;
}

StatusOr<PerplexityResult> Perplexity(GptImpl& model, const decode::DecoderOptions& decoder,
                                      const torch::Tensor& windows, int64_t batch) {
  if (windows.dim() != 2 || windows.size(1) < 2 || batch < 1)
    return Status::InvalidArgument(
        "perplexity: expected windows [N, T + 1] with T >= 1 and batch >= 1");
  const ModelConfig& c = model.config();
  const int64_t T = windows.size(1) - 1;
  if (c.pos == "learned" && T > c.context)
    return Status::InvalidArgument("perplexity: window of " + std::to_string(T) +
                                   " tokens exceeds model.context " + std::to_string(c.context));
  auto made = decode::KvDecoder::Create(&model, decoder);
  if (!made.ok()) return made.status();
  decode::KvDecoder& d = *made.value();
  const torch::Device dev = ModelDevice(model);
  double nll = 0;
  PerplexityResult r;
  for (int64_t start = 0; start < windows.size(0); start += batch) {
    torch::Tensor w = windows.narrow(0, start, std::min(batch, windows.size(0) - start)).to(dev);
    torch::Tensor x = w.narrow(1, 0, T), y = w.narrow(1, 1, T);
    d.Reset();
    d.Prefill(x, [&](int64_t first, const torch::Tensor& logits) {
      torch::Tensor target = y.narrow(1, first, logits.size(1)).unsqueeze(-1);
      nll -=
          torch::log_softmax(logits.to(torch::kFloat), -1).gather(-1, target).sum().item<double>();
    });
    r.tokens += x.numel();
    r.kv_bytes = d.KvBytes();
  }
  r.loss = nll / double(r.tokens);
  r.ppl = std::exp(r.loss);
  return r;
}

torch::Tensor EvalWindows(const TokenSpan& split, int64_t context, int64_t batch, int64_t count) {
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < count; ++i) EvalBatch(split, context, batch, i, count, &tokens);
  return torch::tensor(tokens, torch::kLong).view({batch * count, context + 1});
}

StatusOr<std::vector<BenchRow>> BenchmarkLatency(GptImpl& model,
                                                 const decode::DecoderOptions& decoder,
                                                 const BenchOptions& options) {
  const ModelConfig& c = model.config();
  if (options.repeats < 1 || options.warmup < 0 || options.decode_tokens < 0)
    return Status::InvalidArgument("bench: expected repeats >= 1, warmup >= 0, decode_tokens >= 0");
  for (int64_t ctx : options.contexts)
    if (ctx < 1 || (c.pos == "learned" && ctx + options.decode_tokens > c.context))
      return Status::InvalidArgument(
          "bench context " + std::to_string(ctx) + " + " + std::to_string(options.decode_tokens) +
          " decode tokens does not fit model.context " + std::to_string(c.context));
  auto made = decode::KvDecoder::Create(&model, decoder);
  if (!made.ok()) return made.status();
  decode::KvDecoder& d = *made.value();
  const torch::Device dev = ModelDevice(model);
  torch::manual_seed(options.seed);
  std::vector<BenchRow> rows;
  for (int64_t ctx : options.contexts)
    for (int64_t batch : options.batch_sizes) {
      torch::Tensor prompt = torch::randint(0, c.vocab, {batch, ctx}, torch::kLong).to(dev);
      BenchRow row;
      row.context = ctx;
      row.batch = batch;
      row.device = DeviceLabel(dev);
      std::vector<double> prefill, decode;
      for (int64_t rep = 0; rep < options.warmup + options.repeats; ++rep) {
        d.Reset();
        torch::Tensor next;
        Sync(dev);
        auto t0 = Clock::now();
        d.Prefill(
            prompt,
            [&](int64_t, const torch::Tensor& logits) { next = logits.select(1, 0).argmax(-1); },
            /*last_only=*/true);
        Sync(dev);
        auto t1 = Clock::now();
        const int64_t after_prefill = d.KvBytes();
        for (int64_t k = 0; k < options.decode_tokens; ++k) next = d.Step(next).argmax(-1);
        Sync(dev);
        auto t2 = Clock::now();
        if (rep < options.warmup) continue;
        prefill.push_back(Seconds(t0, t1));
        if (options.decode_tokens > 0)
          decode.push_back(1e3 * Seconds(t1, t2) / double(options.decode_tokens));
        row.kv_bytes_prefill = after_prefill;
        row.kv_bytes_decode = d.KvBytes();
      }
      row.prefill_s = Median(prefill);
      row.decode_ms_per_token = decode.empty() ? 0.0 : Median(decode);
      rows.push_back(row);
    }
  return rows;
}

Json BenchJson(const std::vector<BenchRow>& rows) {
  Json out = Json::array();
  for (const BenchRow& r : rows)
    out.push_back({{"context", r.context},
                   {"batch", r.batch},
                   {"prefill_s", r.prefill_s},
                   {"decode_ms_per_token", r.decode_ms_per_token},
                   {"kv_bytes_prefill", r.kv_bytes_prefill},
                   {"kv_bytes_decode", r.kv_bytes_decode},
                   {"device", r.device}});
  return out;
}

}  // namespace headlab::aoh
