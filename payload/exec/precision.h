// Training precision (train.precision): which dtype the model's matmuls and attention
// compute in, and fp16's dynamic loss scaling. LibTorch translation units only.
//
//   fp32  everything in fp32 (the CPU default).
//   bf16  autocast to bf16 (the CUDA default): linear layers, attention and the output head
//         compute in bf16 on the tensor cores; autocast keeps norms, softmax statistics and
//         reductions in fp32; the residual stream, the loss (GptImpl::Loss upcasts the
//         logits), master weights and AdamW state stay fp32.
//   fp16  autocast to fp16 as bf16, plus dynamic loss scaling (LossScaler); CUDA only.
// Methods' own maths (SAF's calibration and fits, AoH's spectra, AAH's diagnostics) run
// outside the model's forward and so outside autocast: fp32.
#pragma once

#include <string>

#include <torch/torch.h>

#include "common/status.h"

namespace headlab {

enum class Precision { kFp32, kBf16, kFp16 };

// Returns "fp32", "bf16" or "fp16".
const char* PrecisionName(Precision p);

// Resolves train.precision ("auto" | "bf16" | "fp16" | "fp32") for `device`: auto is bf16 on
// CUDA and fp32 on the CPU; bf16 on the CPU runs CPU autocast (slow, for tests); fp16 needs
// CUDA (InvalidArgument naming the key otherwise).
StatusOr<Precision> ResolvePrecision(const std::string& want, const torch::Device& device);

// Returns the dtype matmuls compute in under `p`.
torch::ScalarType ComputeDtype(Precision p);

// Returns the dtype a linear layer produces from x now: the autocast dtype while autocast
// is on for x's device type, else x's dtype.
torch::ScalarType ActivationDtype(const torch::Tensor& x);

// Turns autocast on for `device`'s type with ComputeDtype(p) for its lifetime (nothing for
// fp32), restoring the previous state and clearing autocast's cast cache at the end.
// Nestable; one thread.
class AutocastScope {
 public:
  AutocastScope(Precision p, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  torch::DeviceType type_ = torch::kCPU;
  bool was_enabled_ = false;
  torch::ScalarType was_dtype_ = torch::kFloat;
};

// Dynamic loss scaling for fp16 (the scheme of PyTorch's GradScaler): the loss is multiplied
// by the scale before backward; the gradients are divided by it before clipping and the
// update, and an update whose gradients hold an inf or NaN is skipped; the scale halves after
// such an update and doubles after `growth_interval` clean ones. Disabled (every call a
// no-op) unless fp16. No host synchronisation: found_inf stays on the device.
class LossScaler {
 public:
  LossScaler(bool enabled, const torch::Device& device, double init_scale = 65536.0,
             int64_t growth_interval = 2000);

  bool enabled() const { return enabled_; }
  // Returns loss * scale (enabled) or loss.
  torch::Tensor Scale(const torch::Tensor& loss) const;
  // Divides every defined gradient by the scale; returns found_inf ([1] fp32: 1 iff some
  // gradient is not finite), or an undefined tensor when disabled.
  torch::Tensor Unscale(const std::vector<torch::Tensor>& grads);
  // Adjusts the scale after an update given Unscale's found_inf.
  void Update(const torch::Tensor& found_inf);
  // The current scale and clean-update count (host copies: synchronise; for checkpoints
  // and logs), and their restore.
  double scale() const;
  int64_t growth_tracker() const;
  void Restore(double scale, int64_t growth_tracker);

 private:
  bool enabled_;
  int64_t growth_interval_;
  torch::Tensor scale_;   // [1] fp32 on the device
  torch::Tensor growth_;  // [1] int32 on the device: clean updates since the last change
};

}  // namespace headlab
