// Bench legs' models: head states, fixed heads, device, backend.
#include "payload/exec/bench_model.h"

#include "payload/exec/attention.h"
#include "payload/exec/precision.h"
#include "payload/exec/run_setup.h"

namespace headlab {

Status MakeBenchModel(const ExecConfig& c, const BenchSettings& s, torch::Device device, Gpt* out) {
  StatusOr<Precision> precision = ResolvePrecision(c.train.precision, device);
  if (!precision.ok()) return precision.status();
  // applies model.head_modes; the weights in the compute dtype (a bench never updates them)
  StatusOr<Gpt> seeded = SeededModel(c, nullptr, ComputeDtype(*precision));
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
