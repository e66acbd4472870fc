// dtype.h: the kernels' DType (kernels/hybrid_attention.h) of a LibTorch scalar type, for
// the LibTorch ops in this folder.
#pragma once

#include <torch/torch.h>

#include "kernels/hybrid_attention.h"

namespace headlab {
namespace kernels {

// Returns the DType of `t`: float32, bfloat16 or float16; throws c10::Error naming `what`
// (the op and the tensor) for any other.
inline DType KernelDType(torch::ScalarType t, const char* what) {
  switch (t) {
    case torch::kFloat:
      return DType::kF32;
    case torch::kBFloat16:
      return DType::kBF16;
    case torch::kHalf:
      return DType::kF16;
    default:
      TORCH_CHECK(false, what, ": dtype must be float32, bfloat16 or float16");
  }
  return DType::kF32;
}

}  // namespace kernels
}  // namespace headlab
