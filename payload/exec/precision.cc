// Training precision: autocast scopes and fp16 loss scaling.
#include "payload/exec/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "common/config_key.h"
#include "common/run_config.h"

// LibTorch 2.4 replaced the per-device autocast setters by device-type ones.
#define HEADLAB_AUTOCAST_BY_DEVICE_TYPE \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

namespace headlab {
namespace {

bool AutocastEnabled(torch::DeviceType t) {
#if HEADLAB_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(t);
#else
  return t == torch::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

torch::ScalarType AutocastDtype(torch::DeviceType t) {
#if HEADLAB_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(t);
#else
  return t == torch::kCUDA ? at::autocast::get_autocast_gpu_dtype()
                           : at::autocast::get_autocast_cpu_dtype();
#endif
}

void SetAutocast(torch::DeviceType t, bool enabled, torch::ScalarType dtype) {
#if HEADLAB_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(t, dtype);
  at::autocast::set_autocast_enabled(t, enabled);
#else
  if (t == torch::kCUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

}  // namespace

const char* PrecisionName(Precision p) { return kPrecisionNames[int(p)]; }

StatusOr<Precision> ResolvePrecision(const std::string& want, const torch::Device& device) {
  if (want == "auto") return device.is_cuda() ? Precision::kBf16 : Precision::kFp32;
  StatusOr<Precision> p = ParseNamed<Precision>(kPrecisionNames, want, "train.precision");
  if (!p.ok())
    return Status::InvalidArgument("config: $.config.train.precision: expected auto or one of " +
                                   JoinNames(kPrecisionNames) + ", got \"" + want + "\"");
  if (*p == Precision::kFp16 && !device.is_cuda())
    return Status::InvalidArgument(
        "config: $.config.train.precision: fp16 needs a CUDA device "
        "(CPU runs take fp32 or bf16)");
  return p;
}

torch::ScalarType ComputeDtype(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return torch::kBFloat16;
    case Precision::kFp16:
      return torch::kHalf;
    default:
      return torch::kFloat;
  }
}

torch::ScalarType ActivationDtype(const torch::Tensor& x) {
  const torch::DeviceType t = x.device().type();
  if ((t == torch::kCUDA || t == torch::kCPU) && AutocastEnabled(t) && x.is_floating_point())
    return AutocastDtype(t);
  return x.scalar_type();
}

AutocastScope::AutocastScope(Precision p, const torch::Device& device) {
  if (p == Precision::kFp32) return;
  type_ = device.type();
  was_enabled_ = AutocastEnabled(type_);
  was_dtype_ = AutocastDtype(type_);
  SetAutocast(type_, true, ComputeDtype(p));
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The cast cache holds bf16 copies of the weights for the scope's forward; the outermost
  // scope drops them (the weights change at every update).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  SetAutocast(type_, was_enabled_, was_dtype_);
}

LossScaler::LossScaler(bool enabled, const torch::Device& device, double init_scale,
                       int64_t growth_interval)
    : enabled_(enabled), growth_interval_(growth_interval) {
  if (!enabled_) return;
  scale_ = torch::full({1}, init_scale, torch::dtype(torch::kFloat).device(device));
  growth_ = torch::zeros({1}, torch::dtype(torch::kInt).device(device));
}

torch::Tensor LossScaler::Scale(const torch::Tensor& loss) const {
  return enabled_ ? loss * scale_.to(loss.scalar_type()) : loss;
}

torch::Tensor LossScaler::Unscale(const std::vector<torch::Tensor>& grads) {
  if (!enabled_) return torch::Tensor();
  torch::Tensor found_inf = torch::zeros({1}, scale_.options());
  torch::Tensor inv = scale_.reciprocal();
  std::vector<torch::Tensor> defined;
  for (const torch::Tensor& g : grads)
    if (g.defined()) defined.push_back(g);
  if (scale_.is_cuda()) {
    // One multi-tensor kernel: g *= inv, found_inf = 1 if any g is not finite.
    at::_amp_foreach_non_finite_check_and_unscale_(defined, found_inf, inv);
  } else {
    for (torch::Tensor& g : defined) {
      found_inf =
          torch::maximum(found_inf, g.isfinite().logical_not().any().to(torch::kFloat).view({1}));
      g.mul_(inv);
    }
  }
  return found_inf;
}

void LossScaler::Update(const torch::Tensor& found_inf) {
  if (!enabled_) return;
  if (scale_.is_cuda()) {
    at::_amp_update_scale_(scale_, growth_, found_inf, /*growth_factor=*/2.0,
                           /*backoff_factor=*/0.5, growth_interval_);
    return;
  }
  // The same rule with plain tensor ops (no host synchronisation either).
  torch::Tensor bad = found_inf > 0;
  torch::Tensor grown = growth_ + 1;
  torch::Tensor grow = grown.ge(growth_interval_).logical_and(bad.logical_not());
  scale_.copy_(torch::where(bad, scale_ * 0.5, torch::where(grow, scale_ * 2.0, scale_)));
  growth_.copy_(torch::where(bad.logical_or(grow), torch::zeros_like(growth_), grown));
}

double LossScaler::scale() const { return enabled_ ? scale_.item<double>() : 1.0; }

int64_t LossScaler::growth_tracker() const { return enabled_ ? growth_.item<int64_t>() : 0; }

void LossScaler::Restore(double scale, int64_t growth_tracker) {
  if (!enabled_) return;
  scale_.fill_(scale);
  growth_.fill_(growth_tracker);
}

}  // namespace headlab
