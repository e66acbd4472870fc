// Checkpoint (de)serialization on torch::serialize archives.
#include "worker/exec/checkpoint.h"

#include <sstream>

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
  archive.write("config", BytesTensor(config_json));
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
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    torch::Tensor step, sampler, rng;
    archive.read("step", step);
    archive.read("sampler", sampler);
    archive.read("cpu_rng", rng);
    progress->step = step.item<int64_t>();
    progress->sampler_state = TensorBytes(sampler);
    at::Generator cpu_gen = torch::globalContext().defaultGenerator(torch::kCPU);  // a handle
    cpu_gen.set_state(rng.to(torch::kCPU));
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    return Status::Corruption(source + ": cannot restore checkpoint: " + what.substr(0, 300));
  }
  return Status::Ok();
}

}  // namespace headlab
