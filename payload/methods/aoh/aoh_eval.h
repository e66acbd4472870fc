// AoH evaluation helpers: passkey retrieval over context lengths x insertion depths (AoH
// Fig. 9, §3 Observation 2), perplexity through the cached inference path, and prefill /
// per-token decode latency with KV-cache bytes across context lengths (AoH Table 11's
// columns). All run the model with its current head states through decode::KvDecoder, so the
// same calls measure full attention (all heads ordinary) and any AoH plan.
// Included only by LibTorch translation units.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/json.h"
#include "common/status.h"
#include "payload/decode/decoder.h"
#include "payload/exec/data.h"
#include "payload/exec/model.h"
#include "payload/exec/passkey_prompts.h"

namespace headlab::aoh {

// Passkey prompts come from GeneratePasskey (payload/exec/tasks.h, the exec engineer's
// generator) in the ids of `codec` (payload/exec/passkey_prompts.h; bytes by default):
// sample i of every cell uses seed + i.
struct PasskeyOptions {
  std::vector<int64_t> lengths = {256, 512};          // prompt bytes
  std::vector<double> depths = {0.2, 0.4, 0.6, 0.8};  // AoH §3: 20/40/60/80 % depth
  int64_t samples = 8;                                // per cell, run as one batch
  uint64_t seed = 0;
  PasskeyCodec codec;  // the model's tokenizer (bytes unless set)
};

struct PasskeyCell {
  int64_t length = 0;
  double depth = 0;
  int64_t samples = 0;
  int64_t correct = 0;  // exact match of the greedy answer
  double accuracy() const { return samples ? double(correct) / double(samples) : 0.0; }
};

// Greedy exact-match passkey accuracy of every (length, depth) cell, lengths outer.
// InvalidArgument when the model's vocabulary is not byte-level (>= 256) or, with learned
// positions, a prompt plus its answer does not fit the context.
StatusOr<std::vector<PasskeyCell>> PasskeyAccuracy(GptImpl& model,
                                                   const decode::DecoderOptions& decoder,
                                                   const PasskeyOptions& options);
// Returns the mean accuracy over cells (each cell weighted by its samples).
double MeanPasskeyAccuracy(const std::vector<PasskeyCell>& cells);
// [{"length":L,"depth":D,"samples":N,"correct":C,"accuracy":A}, ...] (the Fig. 9 heatmap).
Json PasskeyJson(const std::vector<PasskeyCell>& cells);

struct PerplexityResult {
  double loss = 0;  // mean next-token NLL, nats/token
  double ppl = 0;   // exp(loss)
  int64_t tokens = 0;
  int64_t kv_bytes = 0;  // the decoder's KV cache after the last window
};

// Returns the perplexity of windows [N, T + 1] (inputs = first T, targets = last T),
// `batch` windows at a time, each window prefilled from position 0 in chunks.
StatusOr<PerplexityResult> Perplexity(GptImpl& model, const decode::DecoderOptions& decoder,
                                      const torch::Tensor& windows, int64_t batch);
// Returns the fixed held-out windows [batch * count, context + 1] of EvalBatch (data.h):
// the same tokens for every seed and arm.
torch::Tensor EvalWindows(const TokenSpan& split, int64_t context, int64_t batch, int64_t count);

struct BenchOptions {
  std::vector<int64_t> contexts = {128, 256};  // prompt lengths
  std::vector<int64_t> batch_sizes = {1};      // sequences decoded together, per context
  int64_t decode_tokens = 16;                  // greedy tokens timed after the prefill
  int64_t warmup = 1;                          // untimed repeats first
  int64_t repeats = 3;                         // timed repeats; the median is reported
  uint64_t seed = 0;                           // random prompt tokens
};

// One Table 11 row for one head configuration, context and batch size.
struct BenchRow {
  int64_t context = 0;
  int64_t batch = 1;               // sequences prefilled and decoded together
  double prefill_s = 0;            // median wall seconds of the chunked prefill
  double decode_ms_per_token = 0;  // median over repeats of the mean ms per decode step (one
                                   // token for each of the batch's sequences)
  int64_t kv_bytes_prefill = 0;    // KV-cache bytes right after the prefill
  int64_t kv_bytes_decode = 0;     // KV-cache bytes after the last decoded token
  std::string device;              // where it ran, e.g. "cpu (2 threads)" or "cuda:0"
};

// Times prefill and decode at every context length; CUDA work is synchronised before each
// clock read. InvalidArgument when, with learned positions, context + decode_tokens
// exceeds the model's context.
StatusOr<std::vector<BenchRow>> BenchmarkLatency(GptImpl& model,
                                                 const decode::DecoderOptions& decoder,
                                                 const BenchOptions& options);
// [{"context":C,"prefill_s":..,"decode_ms_per_token":..,"kv_bytes_prefill":..,
//   "kv_bytes_decode":..,"device":".."}, ...]
Json BenchJson(const std::vector<BenchRow>& rows);
// Returns "cpu (N threads)" or "cuda:I".
std::string DeviceLabel(const torch::Device& device);

}  // namespace headlab::aoh
