// The set-up steps shared by the run kinds.
#include "payload/exec/run_setup.h"

#include <map>
#include <vector>

#include <torch/version.h>

#include "common/files.h"
#include "common/sha256.h"
#include "payload/exec/attention_cuda.h"
#include "payload/exec/data_check.h"
#include "payload/exec/import_weights.h"
#include "payload/exec/precision.h"
#include "payload/exec/train.h"

namespace headlab {

Status PickDevice(const TrainConfig& t, int rank, torch::Device* device) {
  if (t.threads > 0) torch::set_num_threads(int(t.threads));
  const std::string& want = t.device;
  const bool cuda = torch::cuda::is_available();
  if (want == "cuda" && !cuda)
    return Status::Unavailable("train.device is \"cuda\" but no CUDA device is available");
  if (want != "cpu" && cuda && rank >= int(torch::cuda::device_count()))
    return Status::Unavailable("rank " + std::to_string(rank) + " needs GPU " +
                               std::to_string(rank) + " but " +
                               std::to_string(torch::cuda::device_count()) +
                               " are visible: ask for resources.gpus = train.ranks");
  *device = (want == "cpu" || !cuda) ? torch::Device(torch::kCPU)
                                     : torch::Device(torch::kCUDA, int8_t(rank));
  return Status::Ok();
}

StatusOr<Dataset> LoadRunData(const ExecConfig& c) {
  StatusOr<Dataset> d =
      LoadDataSource(c.data.source, c.data.path, c.data.val_fraction, c.model.vocab);
  if (!d.ok()) return d;
  HEADLAB_RETURN_IF_ERROR(CheckDataFitsModel(d.value(), c));
  if (c.data.calib_fraction > 0)
    HEADLAB_RETURN_IF_ERROR(HoldOutCalibration(&d.value(), c.data.calib_fraction, c.model.context));
  if (d->vocab > c.model.vocab)
    return Status::InvalidArgument("config: $.config.model.vocab: the " + c.data.source +
                                   " data set needs vocab >= " + std::to_string(d->vocab) +
                                   ", got " + std::to_string(c.model.vocab));
  for (const TokenSpan* split : {&d->train, &d->val})
    if (split->size <= c.model.context)
      return Status::InvalidArgument(
          "config: $.config.model.context: " + std::to_string(c.model.context) +
          " needs splits of more than that many tokens; " + d->path + " has " +
          std::to_string(d->train.size) + " train and " + std::to_string(d->val.size) +
          " held-out tokens");
  return d;
}

Json DataProvenance(const Dataset& d, const ExecConfig& c) {
  Json prov = {{"dataset_source", c.data.source},  {"dataset_path", d.path},
               {"dataset_sha256", d.sha256},       {"dataset_train_tokens", d.train.size},
               {"dataset_val_tokens", d.val.size}, {"dataset_calib_tokens", d.calib.size}};
  prov.update(DatasetProvenance(d, c.data.source));
  return prov;
}

StatusOr<Gpt> SeededModel(const ExecConfig& c, Json* init_prov, torch::ScalarType weights) {
  torch::manual_seed(uint64_t(c.seed));  // model init; data order has its own generator
  Gpt model(c.model, weights);           // applies model.head_modes
  HEADLAB_RETURN_IF_ERROR(InitFromCheckpoint(*model, c.model, init_prov));
  return model;
}

Status PlaceModel(Gpt& model, const TrainConfig& t, const torch::Device& device) {
  model->to(device);
  return ConfigureExecution(model, t, device);
}

Status RestoreStartCheckpoint(const ResumePoint& from, Gpt& model, torch::optim::Optimizer& opt,
                              TrainProgress* progress) {
  StatusOr<std::string> bytes = ReadFile(from.path);
  if (!bytes.ok()) return bytes.status();
  const std::string sha = Sha256Hex(bytes.value());
  if (sha != from.sha256)
    return Status::Corruption(from.path + ": SHA-256 is " + sha + ", the manifest expects " +
                              from.sha256);
  HEADLAB_RETURN_IF_ERROR(RestoreCheckpoint(bytes.value(), from.path, model, opt, progress));
  if (progress->step != from.step)
    return Status::Corruption(from.path + ": holds step " + std::to_string(progress->step) +
                              ", the manifest expects " + std::to_string(from.step));
  return Status::Ok();
}

Status SaveCheckpoint(const std::string& out_dir, const Json& config_json, Gpt& model,
                      torch::optim::Optimizer& opt, const TrainProgress& progress,
                      EventSink* events) {
  const std::string bytes = SerializeCheckpoint(model, opt, progress, CanonicalJson(config_json));
  const std::string path = CheckpointPath(out_dir, progress.step);
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  events->Artifact("checkpoint", path, Sha256Hex(bytes), bytes.size(), progress.step);
  return Status::Ok();
}

Json RunProvenance(const Gpt& model, const torch::Device& device) {
  Json prov = {{"libtorch_version", TORCH_VERSION},
               {"device", device.str()},
               {"threads", torch::get_num_threads()}};
  prov.update(ExecutionProvenance(model, device));
  return prov;
}

Status ConfigureExecution(Gpt& model, const TrainConfig& t, const torch::Device& device) {
  StatusOr<Precision> p = ResolvePrecision(t.precision, device);
  if (!p.ok()) return p.status();
  model->SetPrecision(*p);
  AttentionMode mode;
  if (!ParseAttentionMode(t.attention, &mode))
    return Status::InvalidArgument(
        "config: $.config.train.attention: expected auto, fused or dense, got \"" + t.attention +
        "\"");
  SetAttentionMode(mode);
  return Status::Ok();
}

Json ExecutionProvenance(const Gpt& model, const torch::Device& device) {
  return {{"precision", PrecisionName(model->precision())},
          {"compute_dtype", c10::toString(ComputeDtype(model->precision()))},
          {"weights_dtype", c10::toString(model->wte->weight.scalar_type())},
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
      Json ms = Json::object(), samples = Json::object();
      for (const PlanTiming& t : c.candidates) {
        ms[t.label] = t.ms;
        samples[t.label] = t.samples_ms;
      }
      out.push_back({{"layer", l},
                     {"shape", c.shape},
                     {"chosen", c.candidates[c.chosen].label},
                     {"candidates_ms", ms},
                     {"samples_ms", samples}});
    }
  }
  return out;
}

Json AttentionPlanProvenance(Gpt& model) {
  return {{"attention_paths", AttentionPaths(model)},
          {"attention_choices", AttentionChoices(model)}};
}

}  // namespace headlab
