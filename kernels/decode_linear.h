// decode_linear.h: a linear layer for a decode step's few rows, y = x W^T (+ bias), as one
// kernel that reads the weight once at memory speed. A decode step multiplies M <= 16 rows
// (one token per sequence) by each weight; cuBLAS's kernels for such shapes read the 124M
// shape's 1.2-4.7 MB weights at ~1 TB/s (a decode step's profile, docs/BENCHMARKS.md), so the
// step's 48 GEMMs cost ~250 us of a ~2-3 ms step in both arms of the decode comparison.
//
// mma.sync m16n8k16 has M = 16: the rows are one A tile (rows past M read as zero), a weight
// tile of 8 output columns is one B fragment. Each lane loads 16 contiguous bytes of a
// weight row per 32-wide k block and the matching 16 bytes of its two x rows; the dot
// product does not depend on the order of k, so the lane's 8 k values fill its fragment
// slots of two m16n8k16 products (logical k 2c + {0, 1} <-> physical 8c + {0, 1}, 2c + 8 +
// {0, 1} <-> 8c + {2, 3}, and 16 + the same <-> 8c + {4..7}, c = lane % 4) and every load is a
// 16-byte vector. One CTA of 8 warps per 8 output columns (one weight tile: 16 columns a CTA
// measured slower for every decode shape, docs/BENCHMARKS.md); the warps split K in 32-wide
// blocks and sum through shared memory; fp32 accumulation, then the bias and the activation
// on the fp32 sum, y rounded once (the reference rounds the product, then the activation).
// No LibTorch here.
#pragma once

#include <cstdint>

#include "kernels/hybrid_attention.h"  // DType, KernelStatus

namespace headlab {
namespace kernels {

// The most rows DecodeLinear takes (one m16n8k16 A tile).
constexpr int kMaxDecodeLinearRows = 16;

// The activation applied to x W^T + bias (an MLP's first layer): GELU as erf,
// 0.5 y (1 + erf(y / sqrt 2)), or as PyTorch's tanh approximation.
enum class DecodeActivation { kNone, kGelu, kGeluTanh };

struct DecodeLinearArgs {
  int rows = 0;                // M <= kMaxDecodeLinearRows
  int in = 0;                  // K, a multiple of 32
  int out = 0;                 // N, a multiple of 8
  DType dtype = DType::kBF16;  // x, w, bias and y: bf16 or fp16
  const void* x = nullptr;     // [M, K], row stride x_stride (elements)
  int64_t x_stride = 0;
  const void* w = nullptr;  // [N, K] (nn.Linear's weight), row stride w_stride
  int64_t w_stride = 0;
  const void* bias = nullptr;  // [N], or null
  void* y = nullptr;           // [M, N], row stride y_stride
  int64_t y_stride = 0;
  DecodeActivation activation = DecodeActivation::kNone;
  // Programmatic dependent launch: the kernel may start while the kernel before it on the
  // stream runs, loading its first weights, and waits for that kernel before it reads x
  // (hybrid_attention_internal.cuh). The decode step's kernels before a linear layer (add+norm,
  // the decode kernel, decode_linear) let it start at their beginning. false: an ordinary launch.
  bool overlap_previous = true;
};

// Returns a non-ok status iff the shape, dtype, pointers or strides are unusable (x and w
// rows must start on 16-byte boundaries).
KernelStatus ValidateDecodeLinear(const DecodeLinearArgs& args);

// Launches the kernel on `stream` (a cudaStream_t).
KernelStatus DecodeLinear(const DecodeLinearArgs& args, void* stream);

}  // namespace kernels
}  // namespace headlab
