// AoH conversion and evaluation with their metrics and artifacts.
#include "worker/methods/aoh/aoh_report.h"

#include "common/files.h"
#include "common/metric_names.h"
#include "common/sha256.h"
#include "worker/methods/aoh/aoh_eval.h"

namespace headlab::aoh {
namespace {

int64_t RetrievalHeads(const AohPlan& plan) {
  int64_t n = 0;
  for (const auto& layer : plan.head_roles)
    for (Role r : layer) n += r == Role::kRetrieval;
  return n;
}

// Writes `doc` to out_dir/name and announces it as an artifact of `kind`.
Status WriteArtifact(const std::string& out_dir, const std::string& name, const std::string& kind,
                     const Json& doc, int64_t step, EventSink* events) {
  HEADLAB_RETURN_IF_ERROR(MakeDirs(out_dir));
  const std::string path = out_dir + "/" + name;
  const std::string text = doc.dump(1) + "\n";
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, text));
  events->Artifact(kind, path, Sha256Hex(text), text.size(), step);
  return Status::Ok();
}

DecoderOptions DecoderFor(GptImpl& model, const AohRunConfig& cfg, const AohPlan* plan) {
  DecoderOptions d;
  d.prefill_chunk = cfg.prefill_chunk;
  if (plan && cfg.anchor_block > 1) {
    d.anchor_block = cfg.anchor_block;
    d.anchor_topk = cfg.anchor_topk;
    d.anchor_map = AnchorHeadMap(model, plan->head_roles, cfg.anchor_block);
  }
  return d;
}

}  // namespace

StatusOr<AohPlan> ConvertAndReport(GptImpl& model, const AohRunConfig& cfg, int64_t step,
                                   EventSink* events) {
  auto plan = PlanAoh(model, cfg.options);
  if (!plan.ok()) return plan.status();
  ApplyPlan(model, plan.value());
  events->Metric(step, kRetrievalHeads, double(RetrievalHeads(plan.value())));
  events->LogLine("aoh: " + std::to_string(RetrievalHeads(plan.value())) +
                  " retrieval heads at sparsity " + std::to_string(cfg.options.sparsity) +
                  " (metric " + MetricName(cfg.options.metric) + ", sink " +
                  std::to_string(cfg.options.sink) + ", recent " + std::to_string(cfg.options.recent) + ")");
  return plan;
}

Status ApplyHeadMaps(GptImpl& model, const Json& head_maps) {
  const ModelConfig& c = model.config();
  if (!head_maps.is_array()) return Status::InvalidArgument("head_maps: expected an array");
  try {
    for (const Json& row : head_maps) {
      const int64_t l = row.at("layer").get<int64_t>(), h = row.at("head").get<int64_t>();
      const std::string role = row.at("role").get<std::string>();
      if (l < 0 || l >= c.layers || h < 0 || h >= c.heads)
        return Status::InvalidArgument("head_maps: head " + std::to_string(l) + "." +
                                       std::to_string(h) + " is outside the model");
      HeadState s;
      if (role == "streaming") {
        s.mode = HeadMode::kStreaming;
        s.sink = row.at("sink").get<int64_t>();
        s.recent = row.at("window").get<int64_t>();
        if (s.sink < 0 || s.recent < 1)
          return Status::InvalidArgument("head_maps: streaming needs sink >= 0 and window >= 1");
      } else if (role != "retrieval") {
        return Status::InvalidArgument("head_maps: unknown role \"" + role + "\"");
      }
      model.attention(l)->SetHeadState(h, s);
    }
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("head_maps: ") + e.what());
  }
  return Status::Ok();
}

StatusOr<Json> EvaluateAndReport(GptImpl& model, const AohRunConfig& cfg, const AohPlan* plan,
                                 const torch::Tensor& windows, int64_t batch, uint64_t seed,
                                 int64_t step, const std::string& out_dir, EventSink* events) {
  torch::NoGradGuard no_grad;
  const DecoderOptions d = DecoderFor(model, cfg, plan);
  Json summary = Json::object();
  const ModelConfig& c = model.config();
  summary[kRetrievalHeads] = plan ? RetrievalHeads(*plan) : c.layers * c.heads;
  if (plan) HEADLAB_RETURN_IF_ERROR(WriteArtifact(out_dir, "aoh_head_maps.json", "aoh_head_maps",
                                                  HeadMapsJson(PlanHeadMaps(*plan)), step, events));

  auto ppl = Perplexity(model, d, windows, batch);
  if (!ppl.ok()) return ppl.status();
  events->Metric(step, metric::kEvalLoss, ppl->loss);
  events->Metric(step, metric::kEvalPpl, ppl->ppl);
  events->Metric(step, kKvBytes, double(ppl->kv_bytes));
  summary[metric::kEvalLoss] = ppl->loss;
  summary[metric::kEvalPpl] = ppl->ppl;
  summary[kKvBytes] = ppl->kv_bytes;

  if (!cfg.passkey_lengths.empty()) {
    PasskeyOptions p;
    p.lengths = cfg.passkey_lengths;
    p.depths = cfg.passkey_depths;
    p.samples = cfg.passkey_samples;
    p.seed = seed;
    auto cells = PasskeyAccuracy(model, d, p);
    if (!cells.ok()) return cells.status();
    const double acc = MeanPasskeyAccuracy(cells.value());
    events->Metric(step, kPasskeyAcc, acc);
    summary[kPasskeyAcc] = acc;
    HEADLAB_RETURN_IF_ERROR(WriteArtifact(out_dir, "aoh_passkey.json", "aoh_passkey",
                                          PasskeyJson(cells.value()), step, events));
  }

  if (!cfg.bench_contexts.empty()) {
    BenchOptions b;
    b.contexts = cfg.bench_contexts;
    b.decode_tokens = cfg.bench_decode_tokens;
    b.repeats = cfg.bench_repeats;
    b.seed = seed;
    auto rows = BenchmarkLatency(model, d, b);
    if (!rows.ok()) return rows.status();
    for (const BenchRow& r : rows.value()) {
      events->Metric(r.context, kBenchPrefillS, r.prefill_s);
      events->Metric(r.context, kBenchDecodeMs, r.decode_ms_per_token);
      events->Metric(r.context, kBenchKvBytes, double(r.kv_bytes_decode));
    }
    HEADLAB_RETURN_IF_ERROR(WriteArtifact(out_dir, "aoh_bench.json", "aoh_bench",
                                          BenchJson(rows.value()), step, events));
  }

  if (c.pos == "rope" && cfg.options.rope_max_distance > 0) {
    auto rho = RopeSpearman(model, cfg.options.rope_max_distance);
    if (!rho.ok()) return rho.status();
    for (size_t l = 0; l < rho->size(); ++l) events->Metric(int64_t(l), kRopeSpearman, (*rho)[l]);
  }
  return summary;
}

}  // namespace headlab::aoh
