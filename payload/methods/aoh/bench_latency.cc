// bench-prefill and bench-decode.
#include "payload/methods/aoh/bench_latency.h"

#include <unistd.h>

#include <torch/torch.h>

#include "common/files.h"
#include "common/log.h"
#include "common/metric_names.h"
#include "common/paired_estimators.h"
#include "common/sha256.h"
#include "payload/exec/bench_clock.h"
#include "payload/exec/bench_model.h"
#include "payload/exec/bench_settings.h"
#include "payload/exec/model.h"
#include "payload/exec/run_setup.h"
#include "payload/exec/stop_flag.h"
#include "payload/methods/aoh/aoh_eval.h"
#include "payload/methods/aoh/aoh_report.h"

namespace headlab {
namespace {

// The model of the leg, on its device, in eval mode, with its head states.
struct Leg {
  torch::Device device{torch::kCPU};
  Gpt model{nullptr};
  BenchSettings settings;
};

StatusOr<Leg> MakeLeg(const BenchRequest& req) {
  Leg leg;
  auto settings = BenchSettingsFromJson(req.config_json, req.config, req.file);
  if (!settings.ok()) return settings.status();
  leg.settings = *settings;
  HEADLAB_RETURN_IF_ERROR(PickDevice(req.config.train, /*rank=*/0, &leg.device));
  HEADLAB_RETURN_IF_ERROR(MakeBenchModel(req.config, leg.settings, leg.device, &leg.model));
  leg.model->eval();
  return leg;
}

Json LegProvenance(const char* kind, const Leg& leg, const BenchClock& clock) {
  Json prov = RunProvenance(leg.model, leg.device);
  prov.update({{"kind", kind},
               {"device", DeviceLabel(leg.device)},
               {"timer", clock.method()},
               {"memory_kind", clock.memory_kind()},
               {"pid", int64_t(::getpid())},
               {"warmup", leg.settings.warmup},
               {"repeats", leg.settings.repeats}});
  return prov;
}

// Writes the table as a bench_table artifact (JSON).
Status SaveTable(const BenchRequest& req, const Json& table, EventSink* events) {
  HEADLAB_RETURN_IF_ERROR(MakeDirs(req.out_dir));
  const std::string path = req.out_dir + "/bench_table.json";
  const std::string bytes = table.dump(2);
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  events->Artifact("bench_table", path, Sha256Hex(bytes), bytes.size(), 0);
  return Status::Ok();
}

// A causal prefill: GptImpl::Hidden over the whole prompt, then the logits of the last
// position only ([B, vocab]; all positions' would be [B, T, vocab], 211 GB for the 124M
// vocabulary at B = 64, T = 16K, and are not what a prefill computes).
torch::Tensor PrefillLogits(GptImpl& m, const torch::Tensor& idx) {
  torch::Tensor h = m.Hidden(idx).select(1, idx.size(1) - 1);
  AutocastScope autocast(m.precision(), idx.device());
  return torch::nn::functional::linear(h, m.HeadWeight());
}

std::string CellKey(const char* key, int64_t length, int64_t batch = 0) {
  std::string k = std::string(key) + ".l" + std::to_string(length);
  return batch > 0 ? k + ".b" + std::to_string(batch) : k;
}

}  // namespace

Status RunBenchPrefill(const BenchRequest& req, EventSink* events) {
  auto leg = MakeLeg(req);
  if (!leg.ok()) return leg.status();
  BenchClock clock(leg->device);
  events->Provenance(LegProvenance("bench-prefill", *leg, clock));
  torch::NoGradGuard no_grad;
  const BenchSettings& s = leg->settings;
  clock.ResetPeakMemory();
  Json table = Json::array();
  Json summary = Json::object();
  int64_t cell = 0;
  for (int64_t len : s.lengths)
    for (int64_t batch : s.batch_sizes) {
      torch::Tensor prompt =
          torch::randint(0, req.config.model.vocab, {batch, len}, torch::kLong).to(leg->device);
      std::vector<double> times;
      for (int64_t rep = 0; rep < s.warmup + s.repeats; ++rep) {
        if (StopRequested()) return Status::Cancelled("bench-prefill stopped by signal");
        clock.Start();
        torch::Tensor logits = PrefillLogits(*leg->model, prompt);
        const double ms = clock.StopMs();
        if (rep >= s.warmup) times.push_back(ms);  // warm-ups discarded
        if (cell == 0 && rep == 0)                 // what the layers ran, after their first forward
          events->Provenance({{"attention_paths", AttentionPaths(leg->model)}});
      }
      const double median = paired::Median(times);
      ++cell;
      events->Metric(cell, CellKey(metric::kBenchPrefillMs, len, batch), median);
      summary[CellKey(metric::kBenchPrefillMs, len, batch)] = median;
      if (cell == 1) summary[metric::kBenchPrefillMs] = median;
      table.push_back({{"length", len},
                       {"batch", batch},
                       {"prefill_ms", median},
                       {"tokens_per_s", double(batch * len) / (median / 1e3)}});
      LogInfo("bench-prefill: length " + std::to_string(len) + " batch " + std::to_string(batch) +
              ": median " + std::to_string(median) + " ms");
    }
  summary[metric::kBenchPeakMemBytes] = double(clock.PeakMemoryBytes());
  HEADLAB_RETURN_IF_ERROR(SaveTable(req,
                                    {{"kind", "bench-prefill"},
                                     {"device", DeviceLabel(leg->device)},
                                     {"timer", clock.method()},
                                     {"rows", table}},
                                    events));
  events->Summary(summary);
  return Status::Ok();
}

Status RunBenchDecode(const BenchRequest& req, EventSink* events) {
  auto leg = MakeLeg(req);
  if (!leg.ok()) return leg.status();
  BenchClock clock(leg->device);  // memory only: BenchmarkLatency synchronises and times
  Json prov = LegProvenance("bench-decode", *leg, clock);
  prov["timer"] = "steady_clock_synchronized";  // aoh::BenchmarkLatency's clock
  // Prefill chunks and decode steps run the KV-cache decoder (every layer): its reference
  // attention, or the decode kernel for decode steps (decode::DecoderPathLabel).
  std::vector<int64_t> layers(size_t(req.config.model.layers));
  for (size_t l = 0; l < layers.size(); ++l) layers[l] = int64_t(l);
  const BenchSettings& s = leg->settings;
  auto aoh_config = aoh::AohRunConfigFromJson(req.config_json, req.file);
  if (!aoh_config.ok()) return aoh_config.status();
  const decode::DecoderOptions decoder =
      aoh::DecoderFor(*leg->model.get(), *aoh_config, /*plan=*/nullptr);
  prov["attention_paths"] =
      Json::object({{decode::DecoderPathLabel(*leg->model.get(), leg->device, decoder), layers}});
  events->Provenance(prov);
  aoh::BenchOptions options;
  options.contexts = s.lengths;
  options.batch_sizes = s.decode_batch_sizes;
  options.decode_tokens = s.decode_tokens;
  options.warmup = s.warmup;
  options.repeats = s.repeats;
  options.seed = uint64_t(req.config.seed);
  clock.ResetPeakMemory();
  torch::NoGradGuard no_grad;
  auto rows = aoh::BenchmarkLatency(*leg->model, decoder, options);
  if (!rows.ok())
    return Status::InvalidArgument(req.file + ": $.config.bench: " + rows.status().message());
  Json summary = Json::object();
  for (size_t i = 0; i < rows->size(); ++i) {
    const aoh::BenchRow& r = (*rows)[i];
    const double prefill_ms = 1e3 * r.prefill_s;
    const int64_t b = r.batch == 1 ? 0 : r.batch;  // batch 1: keys without ".b1"
    events->Metric(int64_t(i + 1), CellKey(metric::kBenchDecodeMsPerToken, r.context, b),
                   r.decode_ms_per_token);
    summary[CellKey(metric::kBenchDecodeMsPerToken, r.context, b)] = r.decode_ms_per_token;
    summary[CellKey(metric::kBenchKvBytes, r.context, b)] = double(r.kv_bytes_decode);
    summary[CellKey(metric::kBenchPrefillMs, r.context, b)] = prefill_ms;
    if (i == 0) {
      summary[metric::kBenchDecodeMsPerToken] = r.decode_ms_per_token;
      summary[metric::kBenchKvBytes] = double(r.kv_bytes_decode);
      summary[metric::kBenchPrefillMs] = prefill_ms;
    }
    LogInfo("bench-decode: length " + std::to_string(r.context) + " batch " +
            std::to_string(r.batch) + ": " + std::to_string(r.decode_ms_per_token) +
            " ms/step, KV " + std::to_string(r.kv_bytes_decode) + " bytes");
  }
  summary[metric::kBenchPeakMemBytes] = double(clock.PeakMemoryBytes());
  HEADLAB_RETURN_IF_ERROR(SaveTable(req,
                                    {{"kind", "bench-decode"},
                                     {"device", DeviceLabel(leg->device)},
                                     {"rows", aoh::BenchJson(*rows)}},
                                    events));
  events->Summary(summary);
  return Status::Ok();
}

}  // namespace headlab
