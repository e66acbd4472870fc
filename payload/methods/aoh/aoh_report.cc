// AoH conversion and evaluation with their metrics and artifacts.
#include "payload/methods/aoh/aoh_report.h"

#include <algorithm>
#include <cmath>

#include "common/files.h"
#include "common/sha256.h"
#include "payload/methods/aoh/aoh_eval.h"
#include "payload/methods/aoh/aoh_metrics.h"

namespace headlab::aoh {
namespace {

using namespace metric;

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

Json RolesJson(const std::vector<std::vector<Role>>& roles) {
  Json out = Json::array();
  for (const auto& layer : roles) {
    Json row = Json::array();
    for (Role r : layer) row.push_back(RoleName(r));
    out.push_back(row);
  }
  return out;
}

// Reads [layer][i] roles with `width` entries per layer.
StatusOr<std::vector<std::vector<Role>>> RolesFromJson(const Json& j, const char* field,
                                                       int64_t layers, int64_t width) {
  std::vector<std::vector<Role>> out;
  if (!j.is_array() || int64_t(j.size()) != layers)
    return Status::InvalidArgument(std::string("aoh plan: $.") + field + ": expected " +
                                   std::to_string(layers) + " layers");
  for (const Json& layer : j) {
    if (!layer.is_array() || int64_t(layer.size()) != width)
      return Status::InvalidArgument(std::string("aoh plan: $.") + field + ": expected " +
                                     std::to_string(width) + " entries per layer");
    out.emplace_back();
    for (const Json& r : layer) {
      if (r == "retrieval")
        out.back().push_back(Role::kRetrieval);
      else if (r == "streaming")
        out.back().push_back(Role::kStreaming);
      else
        return Status::InvalidArgument(std::string("aoh plan: $.") + field + ": unknown role " +
                                       r.dump());
    }
  }
  return out;
}

}  // namespace

decode::DecoderOptions DecoderFor(GptImpl& model, const AohRunConfig& cfg, const AohPlan* plan) {
  decode::DecoderOptions d;
  d.prefill_chunk = cfg.prefill_chunk;
  d.path = cfg.decode_path;
  if (plan && cfg.anchor_block > 1) {
    d.anchor_block = cfg.anchor_block;
    d.anchor_topk = cfg.anchor_topk;
    d.anchor_map = AnchorHeadMap(model, plan->head_roles, cfg.anchor_block);
  }
  return d;
}

Json PlanJson(const AohPlan& plan) {
  Json scores = Json::array();
  for (const auto& layer : plan.head_scores) {
    Json row = Json::array();
    for (const SpectralScores& s : layer)
      row.push_back({s.effective_rank, s.frobenius, s.spectral, s.stable_rank});
    scores.push_back(row);
  }
  return {{"head_scores", scores},
          {"group_scores", plan.group_scores},
          {"group_roles", RolesJson(plan.group_roles)},
          {"head_roles", RolesJson(plan.head_roles)}};
}

StatusOr<AohPlan> PlanFromJson(const Json& j, const AohOptions& options, const GptImpl& model) {
  const ModelConfig& c = model.config();
  AohPlan plan;
  plan.options = options;
  try {
    auto heads = RolesFromJson(j.at("head_roles"), "head_roles", c.layers, c.heads);
    if (!heads.ok()) return heads.status();
    auto groups = RolesFromJson(j.at("group_roles"), "group_roles", c.layers, c.kv_heads);
    if (!groups.ok()) return groups.status();
    plan.head_roles = std::move(heads.value());
    plan.group_roles = std::move(groups.value());
    plan.group_scores = j.at("group_scores").get<std::vector<std::vector<double>>>();
    for (const Json& layer : j.at("head_scores")) {
      plan.head_scores.emplace_back();
      for (const Json& s : layer)
        plan.head_scores.back().push_back({s.at(0).get<double>(), s.at(1).get<double>(),
                                           s.at(2).get<double>(), s.at(3).get<double>()});
    }
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("aoh plan: ") + e.what());
  }
  if (int64_t(plan.head_scores.size()) != c.layers || int64_t(plan.group_scores.size()) != c.layers)
    return Status::InvalidArgument("aoh plan: $.head_scores / $.group_scores: expected " +
                                   std::to_string(c.layers) + " layers");
  for (int64_t l = 0; l < c.layers; ++l)
    if (int64_t(plan.head_scores[l].size()) != c.heads ||
        int64_t(plan.group_scores[l].size()) != c.kv_heads)
      return Status::InvalidArgument("aoh plan: layer " + std::to_string(l) +
                                     ": scores do not match the model's heads");
  return plan;
}

StatusOr<AohPlan> ConvertAndReport(GptImpl& model, const AohRunConfig& cfg, int64_t step,
                                   EventSink* events) {
  auto plan = PlanAoh(model, cfg.options);
  if (!plan.ok()) return plan.status();
  ApplyPlan(model, plan.value());
  events->Metric(step, kAohRetrievalHeads, double(RetrievalHeads(plan.value())));
  events->LogLine("aoh: " + std::to_string(RetrievalHeads(plan.value())) +
                  " retrieval heads at sparsity " + std::to_string(cfg.options.sparsity) +
                  " (metric " + MetricName(cfg.options.metric) + ", sink " +
                  std::to_string(cfg.options.sink) + ", recent " +
                  std::to_string(cfg.options.recent) + ")");
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
                                 int64_t step, const std::string& out_dir, EventSink* events,
                                 const PasskeyCodec* passkey) {
  torch::NoGradGuard no_grad;
  const decode::DecoderOptions d = DecoderFor(model, cfg, plan);
  Json summary = Json::object();
  const ModelConfig& c = model.config();
  summary[kAohRetrievalHeads] = plan ? RetrievalHeads(*plan) : c.layers * c.heads;
  if (plan)
    HEADLAB_RETURN_IF_ERROR(WriteArtifact(out_dir, "aoh_head_maps.json", "aoh_head_maps",
                                          HeadMapsJson(PlanHeadMaps(*plan)), step, events));

  auto ppl = Perplexity(model, d, windows, batch);
  if (!ppl.ok()) return ppl.status();
  // aoh.* rather than eval.*: the loop's own eval.ppl (same tokens, the layer's masks) stays
  // the one its log-prob artifact and paired comparisons are computed from.
  events->Metric(step, kAohLoss, ppl->loss);
  events->Metric(step, kAohPpl, ppl->ppl);
  events->Metric(step, kAohKvBytes, double(ppl->kv_bytes));
  summary[kAohLoss] = ppl->loss;
  summary[kAohPpl] = ppl->ppl;
  summary[kAohKvBytes] = ppl->kv_bytes;

  if (!cfg.passkey_lengths.empty()) {
    PasskeyOptions p;
    p.lengths = cfg.passkey_lengths;
    p.depths = cfg.passkey_depths;
    p.samples = cfg.passkey_samples;
    p.seed = seed;
    if (passkey) p.codec = *passkey;
    auto cells = PasskeyAccuracy(model, d, p);
    if (!cells.ok()) return cells.status();
    const double acc = MeanPasskeyAccuracy(cells.value());
    events->Metric(step, kAohPasskeyAcc, acc);
    summary[kAohPasskeyAcc] = acc;
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
      events->Metric(r.context, kAohBenchPrefillS, r.prefill_s);
      events->Metric(r.context, kAohBenchDecodeMs, r.decode_ms_per_token);
      events->Metric(r.context, kAohBenchKvBytes, double(r.kv_bytes_decode));
    }
    const BenchRow& longest = *std::max_element(
        rows->begin(), rows->end(),
        [](const BenchRow& a, const BenchRow& b) { return a.context < b.context; });
    summary[kAohBenchContext] = longest.context;
    summary[kAohBenchPrefillS] = longest.prefill_s;
    summary[kAohBenchDecodeMs] = longest.decode_ms_per_token;
    summary[kAohBenchKvBytes] = longest.kv_bytes_decode;
    events->LogLine("aoh bench on " + longest.device + ": context " +
                    std::to_string(longest.context) + " prefill " +
                    std::to_string(longest.prefill_s) + " s, decode " +
                    std::to_string(longest.decode_ms_per_token) + " ms/token, KV " +
                    std::to_string(longest.kv_bytes_decode) + " bytes");
    HEADLAB_RETURN_IF_ERROR(WriteArtifact(out_dir, "aoh_bench.json", "aoh_bench",
                                          BenchJson(rows.value()), step, events));
  }

  if (c.pos == "rope" && cfg.options.rope_max_distance > 0) {
    auto rho = RopeSpearman(model, cfg.options.rope_max_distance);
    if (!rho.ok()) return rho.status();
    double sum = 0;
    int64_t n = 0;
    for (size_t l = 0; l < rho->size(); ++l) {
      events->Metric(int64_t(l), kAohRopeSpearman, (*rho)[l]);
      if (std::isfinite((*rho)[l])) sum += (*rho)[l], ++n;
    }
    if (n > 0) summary[kAohRopeSpearman] = sum / double(n);
  }
  return summary;
}

}  // namespace headlab::aoh
