// Bench legs' models: head states, fixed heads, device, backend.
#include "payload/exec/bench_model.h"

#include "payload/exec/attention.h"
#include "payload/exec/run_setup.h"

namespace headlab {

Status MakeBenchModel(const ExecConfig& c, const BenchSettings& s, torch::Device device, Gpt* out) {
  StatusOr<Gpt> seeded = SeededModel(c, nullptr);  // applies model.head_modes
  if (!seeded.ok()) return seeded.status();
  Gpt model = *seeded;
  const int64_t T = c.model.context;
  const torch::Tensor zeros = torch::zeros({T});
  const torch::Tensor log_z = CompactLogNormalizer(zeros, zeros);
  for (const HeadAssignment& a : s.fixed_heads)
    model->attention(a.layer)->SetFixedCompact(a.head, zeros, zeros, log_z);
  *out = model;
  return PlaceModel(model, c.train, device);
}

}  // namespace headlab
