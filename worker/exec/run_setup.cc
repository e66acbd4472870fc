// Precision and attention set-up shared by the run kinds.
#include "worker/exec/run_setup.h"

#include <map>
#include <vector>

#include "worker/exec/attention_cuda.h"
#include "worker/exec/precision.h"

namespace headlab {

Status ConfigureExecution(Gpt& model, const TrainConfig& t, const torch::Device& device) {
  StatusOr<Precision> p = ResolvePrecision(t.precision, device);
  if (!p.ok()) return p.status();
  model->SetPrecision(*p);
  AttentionMode mode;
  if (!ParseAttentionMode(t.attention, &mode))
    return Status::InvalidArgument("config: $.config.train.attention: expected auto, fused or dense, got \"" +
                                   t.attention + "\"");
  SetAttentionMode(mode);
  return Status::Ok();
}

Json ExecutionProvenance(const Gpt& model, const torch::Device& device) {
  return {{"precision", PrecisionName(model->precision())},
          {"compute_dtype", c10::toString(ComputeDtype(model->precision()))},
          {"attention", AttentionModeName(GetAttentionMode())},
          {"attention_backend", AttentionBackendName(device)}};
}

Json AttentionPaths(Gpt& model) {
  std::map<std::string, std::vector<int64_t>> by_label;
  for (int64_t l = 0; l < model->config().layers; ++l) {
    std::string label = LayerPathLabel(*model->attention(l));
    by_label[label.empty() ? "dense_reference" : label].push_back(l);
  }
  Json out = Json::object();
  for (const auto& [label, layers] : by_label) out[label] = layers;
  return out;
}

Json AttentionChoices(Gpt& model) {
  Json out = Json::array();
  for (int64_t l = 0; l < model->config().layers; ++l) {
    for (const PlanChoice& c : LayerPlanChoices(*model->attention(l))) {
      Json ms = Json::object();
      for (const PlanTiming& t : c.candidates) ms[t.label] = t.ms;
      out.push_back({{"layer", l}, {"shape", c.shape}, {"chosen", c.candidates[c.chosen].label},
                     {"candidates_ms", ms}});
    }
  }
  return out;
}

}  // namespace headlab
