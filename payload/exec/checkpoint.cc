// Checkpoint (de)serialization on torch::serialize archives.
#include "payload/exec/checkpoint.h"

#include <algorithm>
#include <sstream>

#include "common/json.h"

namespace headlab {
namespace {

torch::Tensor BytesTensor(const std::string& s) {
  torch::Tensor t = torch::empty({int64_t(s.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr<uint8_t>(), s.data(), s.size());
  return t;
}

std::string TensorBytes(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kCPU).contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), size_t(c.numel()));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Returns [group, index] of tensor t among the optimiser's parameters, or null.
Json OptimizerSlot(torch::optim::Optimizer& optimizer, const torch::Tensor& t) {
  auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<torch::Tensor>& params = groups[g].params();
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].is_same(t)) return Json::array({int64_t(g), int64_t(i)});
  }
  return nullptr;
}

// Head states as JSON: [[{mode, window, sink, recent, dense, removed[, trainable]} per head]
// per layer]. Fixed heads' compact patterns are model buffers and travel in the model
// archive, dense ones under DenseKey(layer); `removed` marks heads pruned physically
// (attention.h RemoveHeads), whose parameters the archive holds in the smaller shapes;
// `trainable` (SAF App. C.3.2) holds the optimiser slots [group, index] of the head's alpha
// and rho, so a restore puts fresh leaf tensors where the saved AdamW moments belong.
std::string HeadStatesJson(Gpt& model, torch::optim::Optimizer& optimizer) {
  Json layers = Json::array();
  for (int64_t l = 0; l < model->config().layers; ++l) {
    Json heads = Json::array();
    HybridAttention& attn = model->attention(l);
    for (int64_t h = 0; h < attn->heads(); ++h) {
      const HeadState& s = attn->head_states()[size_t(h)];
      Json head = {{"mode", int(s.mode)}, {"window", s.window}, {"sink", s.sink},
                   {"recent", s.recent},  {"dense", s.dense},   {"removed", attn->removed(h)}};
      if (attn->fixed_trainable(h)) {
        auto [alpha, rho] = attn->MakeFixedTrainable(h);  // the existing tensors
        Json a = OptimizerSlot(optimizer, alpha), r = OptimizerSlot(optimizer, rho);
        if (!a.is_null() && !r.is_null()) head["trainable"] = {{"alpha", a}, {"rho", r}};
      }
      heads.push_back(head);
    }
    layers.push_back(heads);
  }
  return CanonicalJson(layers);
}

// A trainable fixed head's tensor and the optimiser slot its saved moments belong to.
struct TrainableSlot {
  int64_t group, index;
  torch::Tensor tensor;
};

// Inserts the tensors at their slots (ascending, so every earlier slot is in place); a
// group one past the last is created with group 0's options and no weight decay, as SAF's
// hooks create it (the optimiser restore then overwrites the options).
Status PlaceTrainable(std::vector<TrainableSlot> slots, const std::string& source,
                      torch::optim::Optimizer& optimizer) {
  std::sort(slots.begin(), slots.end(), [](const TrainableSlot& a, const TrainableSlot& b) {
    return a.group != b.group ? a.group < b.group : a.index < b.index;
  });
  for (TrainableSlot& s : slots) {
    auto& groups = optimizer.param_groups();
    if (s.group == int64_t(groups.size()) && !groups.empty()) {
      auto options = std::make_unique<torch::optim::AdamWOptions>(
          static_cast<torch::optim::AdamWOptions&>(groups[0].options()));
      options->weight_decay(0.0);
      optimizer.add_param_group(torch::optim::OptimizerParamGroup({}, std::move(options)));
    }
    if (s.group < 0 || s.group >= int64_t(groups.size()) || s.index < 0 ||
        s.index > int64_t(groups[size_t(s.group)].params().size()))
      return Status::Corruption(source + ": head_states: trainable slot [" +
                                std::to_string(s.group) + ", " + std::to_string(s.index) +
                                "] does not fit the optimiser");
    std::vector<torch::Tensor>& params = groups[size_t(s.group)].params();
    params.insert(params.begin() + s.index, s.tensor);
  }
  return Status::Ok();
}

// Removes from `model` the heads the checkpoint's head states mark `removed`, so that its
// parameters take the checkpoint's shapes before they are loaded.
void RemoveCheckpointedHeads(const std::string& text, Gpt& model) {
  StatusOr<Json> parsed = ParseJson(text, "head_states");
  if (!parsed.ok() || !parsed->is_array()) return;  // RestoreHeadStates reports it
  for (size_t l = 0; l < parsed->size() && int64_t(l) < model->config().layers; ++l) {
    const Json& heads = (*parsed)[l];
    std::vector<int64_t> removed;
    for (size_t h = 0; heads.is_array() && h < heads.size(); ++h)
      if (heads[h].is_object() && heads[h].value("removed", false)) removed.push_back(int64_t(h));
    if (!removed.empty()) model->attention(int64_t(l))->RemoveHeads(removed);
  }
}

// The archive key of layer l's dense fixed patterns ([heads, context, context]).
std::string DenseKey(int64_t l) { return "fixed_dense." + std::to_string(l); }

// Installs the head states HeadStatesJson wrote (after the model's buffers were loaded,
// before the optimiser's state is): dense fixed heads get their patterns from `archive`;
// trainable fixed heads get fresh leaf tensors from their (current) buffers, placed in the
// optimiser at their saved slots.
Status RestoreHeadStates(const std::string& text, const std::string& source, Gpt& model,
                         torch::optim::Optimizer& optimizer,
                         torch::serialize::InputArchive& archive) {
  std::vector<TrainableSlot> slots;
  StatusOr<Json> parsed = ParseJson(text, source + ": head_states");
  if (!parsed.ok()) return Status::Corruption(parsed.status().message());
  const Json& layers = parsed.value();
  if (!layers.is_array() || int64_t(layers.size()) != model->config().layers)
    return Status::Corruption(source + ": head_states: expected " +
                              std::to_string(model->config().layers) + " layers");
  for (int64_t l = 0; l < model->config().layers; ++l) {
    HybridAttention& attn = model->attention(l);
    const Json& heads = layers[size_t(l)];
    if (!heads.is_array() || int64_t(heads.size()) != attn->heads())
      return Status::Corruption(source + ": head_states: layer " + std::to_string(l) +
                                ": expected " + std::to_string(attn->heads()) + " heads");
    for (int64_t h = 0; h < attn->heads(); ++h) {
      const Json& j = heads[size_t(h)];
      HeadState s;
      s.mode = HeadMode(j.at("mode").get<int>());
      s.window = j.at("window").get<int64_t>();
      s.sink = j.at("sink").get<int64_t>();
      s.recent = j.at("recent").get<int64_t>();
      s.dense = j.at("dense").get<bool>();
      if (s.mode == HeadMode::kFixed && s.dense) {
        torch::Tensor dense;
        if (!archive.try_read(DenseKey(l), dense))
          return Status::Corruption(
              source + ": head " + std::to_string(l) + "." + std::to_string(h) +
              " is fixed with a dense pattern, which this checkpoint does not hold");
        attn->SetFixedDense(h, dense[h]);
      } else if (s.mode == HeadMode::kFixed) {
        attn->SetFixedCompact(h, attn->fixed_alpha[h].clone(), attn->fixed_rho[h].clone(),
                              attn->fixed_log_z[h].clone());
      } else {
        attn->SetHeadState(h, s);
      }
      if (j.contains("trainable")) {
        if (s.mode != HeadMode::kFixed)
          return Status::Corruption(source + ": head " + std::to_string(l) + "." +
                                    std::to_string(h) + " is trainable but not fixed");
        auto [alpha, rho] = attn->MakeFixedTrainable(h);
        const Json& t = j.at("trainable");
        slots.push_back(
            {t.at("alpha").at(0).get<int64_t>(), t.at("alpha").at(1).get<int64_t>(), alpha});
        slots.push_back({t.at("rho").at(0).get<int64_t>(), t.at("rho").at(1).get<int64_t>(), rho});
      }
    }
  }
  return PlaceTrainable(std::move(slots), source, optimizer);
}

}  // namespace

std::string SerializeCheckpoint(Gpt& model, torch::optim::Optimizer& optimizer,
                                const TrainProgress& progress, const std::string& config_json) {
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  model->save(model_archive);
  optimizer.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("step", torch::tensor(progress.step, torch::kLong));
  archive.write("sampler", BytesTensor(progress.sampler_state));
  archive.write("cpu_rng", torch::globalContext().defaultGenerator(torch::kCPU).get_state());
  if (progress.loss_scale > 0)
    archive.write(
        "loss_scale",
        torch::tensor({progress.loss_scale, double(progress.loss_scale_growth)}, torch::kDouble));
  archive.write("config", BytesTensor(config_json));
  archive.write("head_states", BytesTensor(HeadStatesJson(model, optimizer)));
  for (int64_t l = 0; l < model->config().layers; ++l) {  // dense fixed patterns, if any
    HybridAttention& attn = model->attention(l);
    for (const HeadState& st : attn->head_states())
      if (st.mode == HeadMode::kFixed && st.dense) {
        archive.write(DenseKey(l), attn->fixed_dense);
        break;
      }
  }
  Json names = Json::array();
  for (const auto& [name, state] : progress.method_states) {
    names.push_back(name);
    archive.write("method." + name, BytesTensor(state));
  }
  archive.write("method_names", BytesTensor(CanonicalJson(names)));
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

Status RestoreCheckpoint(const std::string& bytes, const std::string& source, Gpt& model,
                         torch::optim::Optimizer& optimizer, TrainProgress* progress) {
  try {
    torch::serialize::InputArchive archive, model_archive, optimizer_archive;
    torch::Device device = model->parameters().front().device();
    archive.load_from(bytes.data(), bytes.size(), device);
    archive.read("model", model_archive);
    torch::Tensor head_states;  // absent in checkpoints written before head states were saved
    const bool has_head_states = archive.try_read("head_states", head_states);
    if (has_head_states) RemoveCheckpointedHeads(TensorBytes(head_states), model);
    // Module::load replaces each tensor wholesale (set_), so a checkpoint of another shape
    // would load silently; compare shapes explicitly.
    std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
    for (const auto& p : model->named_parameters())
      shapes.emplace_back(p.key(), p.value().sizes().vec());
    model->load(model_archive);
    size_t i = 0;
    for (const auto& p : model->named_parameters()) {
      if (p.value().sizes().vec() != shapes[i].second)
        return Status::Corruption(source + ": parameter " + p.key() + " has shape " +
                                  ShapeString(p.value().sizes().vec()) + ", the model needs " +
                                  ShapeString(shapes[i].second));
      ++i;
    }
    if (has_head_states)
      HEADLAB_RETURN_IF_ERROR(
          RestoreHeadStates(TensorBytes(head_states), source, model, optimizer, archive));
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    torch::Tensor step, sampler, rng;
    archive.read("step", step);
    archive.read("sampler", sampler);
    archive.read("cpu_rng", rng);
    progress->step = step.item<int64_t>();
    progress->sampler_state = TensorBytes(sampler);
    torch::Tensor loss_scale;  // fp16 runs only
    progress->loss_scale = 0;
    progress->loss_scale_growth = 0;
    if (archive.try_read("loss_scale", loss_scale)) {
      loss_scale = loss_scale.to(torch::kCPU);
      progress->loss_scale = loss_scale[0].item<double>();
      progress->loss_scale_growth = int64_t(loss_scale[1].item<double>());
    }
    at::Generator cpu_gen = torch::globalContext().defaultGenerator(torch::kCPU);  // a handle
    cpu_gen.set_state(rng.to(torch::kCPU));
    torch::Tensor method_names;  // absent in checkpoints written before methods had state
    progress->method_states.clear();
    if (archive.try_read("method_names", method_names)) {
      StatusOr<Json> names = ParseJson(TensorBytes(method_names), source + ": method_names");
      if (!names.ok()) return Status::Corruption(names.status().message());
      for (const Json& name : names.value()) {
        torch::Tensor state;
        archive.read("method." + name.get<std::string>(), state);
        progress->method_states[name.get<std::string>()] = TensorBytes(state);
      }
    }
  } catch (const Json::exception& e) {
    return Status::Corruption(source + ": head_states or method_names: " + e.what());
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    return Status::Corruption(source + ": cannot restore checkpoint: " + what.substr(0, 300));
  }
  return Status::Ok();
}

}  // namespace headlab
