// Bench legs' models: head states, fixed heads, device, backend.
#include "worker/exec/bench_model.h"

#include "worker/exec/attention.h"
#include "worker/exec/run_setup.h"
#include "worker/exec/import_weights.h"

namespace headlab {

Status MakeBenchModel(const ExecConfig& c, const BenchSettings& s, torch::Device device, Gpt* out) {
  torch::manual_seed(uint64_t(c.seed));
  Gpt model(c.model);  // applies model.head_modes
  HEADLAB_RETURN_IF_ERROR(InitFromCheckpoint(*model, c.model, nullptr));
  const int64_t T = c.model.context;
  const torch::Tensor zeros = torch::zeros({T});
  const torch::Tensor log_z = CompactLogNormalizer(zeros, zeros);
  for (const HeadAssignment& a : s.fixed_heads)
    model->attention(a.layer)->SetFixedCompact(a.head, zeros, zeros, log_z);
  model->to(device);
  *out = model;
  return ConfigureExecution(model, c.train, device);
}

}  // namespace headlab
