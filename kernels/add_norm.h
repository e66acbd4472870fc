// add_norm.h: the residual add and the next norm of a decode step as one kernel, written
// in the dtype the next matrix product reads. A decode step (one token per sequence) spends
// more on launching its small kernels than on their work; between two blocks of a layer
// the reference runs three of them (x + delta, the norm in fp32, autocast's cast of its
// output before the next linear layer), this one:
//   x <- x + delta                           (fp32 residual stream, in place; delta optional)
//   LayerNorm  y = (x - mean) / sqrt(var + eps) * weight + bias      var: biased, as torch's
//   RMSNorm    y = x / sqrt(mean(x^2) + eps) * weight
// per row of `width` elements, statistics in fp32 (two passes over the row held in
// registers), y rounded once to its dtype. One warp per row for >= 512 rows of width <=
// 1024 in aligned 4-element vectors (a prefill chunk), else one CTA of 256 threads per row
// (a decode step); width <= 8192.
// No LibTorch here (kernels/torch/add_norm_op.h).
#pragma once

#include <cstdint>

#include "kernels/hybrid_attention.h"  // DType, KernelStatus

namespace headlab {
namespace kernels {

// The widest row AddNorm takes.
constexpr int kMaxAddNormWidth = 8192;

struct AddNormArgs {
  int rows = 0, width = 0;
  float* x = nullptr;  // fp32 [rows, width], row stride x_stride (elements)
  int64_t x_stride = 0;
  const void* delta = nullptr;  // [rows, width] in delta_dtype, or null: no add
  DType delta_dtype = DType::kBF16;
  int64_t delta_stride = 0;
  const float* weight = nullptr;  // [width]
  const float* bias = nullptr;    // [width] (LayerNorm only), or null
  bool rms = false;
  float eps = 1e-5f;
  void* y = nullptr;  // [rows, width] in y_dtype, row stride y_stride
  DType y_dtype = DType::kBF16;
  int64_t y_stride = 0;
  // Programmatic dependent launch (hybrid_attention_internal.cuh): the launch overlaps the
  // end of the kernel before it, and the kernel waits for that one before it reads or
  // writes anything; it lets the kernel after it start at its own beginning (decode_linear.h).
  // false: an ordinary launch.
  bool overlap_previous = true;
};

// Returns a non-ok status iff the shapes, pointers or strides are unusable.
KernelStatus ValidateAddNorm(const AddNormArgs& args);

// Launches the kernel on `stream` (a cudaStream_t).
KernelStatus AddNorm(const AddNormArgs& args, void* stream);

}  // namespace kernels
}  // namespace headlab
