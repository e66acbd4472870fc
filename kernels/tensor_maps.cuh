// tensor_maps.cuh: the TMA tensor maps of the warp-specialised kernels (host side): the
// driver's encoder, looked up through the runtime; the map of a strided (B, T, heads, d) view
// for boxes of 64 elements x `rows` rows in the 128-byte swizzle wgmma reads; and the map of
// the backward's fp32 dQ workspace.
#pragma once

#include <cuda.h>          // CUtensorMap
#include <cudaTypedefs.h>  // the encoder's signature; the encoder itself comes from the driver

#include <type_traits>

#include "kernels/hybrid_attention_internal.cuh"

namespace headlab {
namespace kernels {
namespace internal {

using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

// The driver's tensor-map encoder (looked up once; null where the driver lacks it).
inline EncodeTiled Encoder() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// The tensor map of a 4-D tensor (dims innermost first, dims[0] contiguous) with element
// strides `elem_strides` for dims 1-3, for boxes of `box0` x `rows` elements of dims 0 and 1
// in the 128-byte swizzle (box0 x element size = 128 bytes: one swizzled row); boxes past the
// tensor's bounds read as zeros and are clipped on a store or reduction. A dimension of size 1
// gets a nominal stride (the encoder wants one that is a nonzero multiple of 16 bytes).
inline bool EncodeSw128(CUtensorMap* map, CUtensorMapDataType type, size_t elem_bytes,
                        const void* data, const cuuint64_t (&dims)[4],
                        const int64_t (&elem_strides)[3], int box0, int rows) {
  const EncodeTiled encode = Encoder();
  if (encode == nullptr) return false;
  cuuint64_t span = dims[0] * elem_bytes;  // bytes from the first element to past the last
  for (int i = 0; i < 3; ++i) span += cuuint64_t(elem_strides[i]) * (dims[i + 1] - 1) * elem_bytes;
  const cuuint64_t nominal = (span + 15) / 16 * 16;
  cuuint64_t strides[3];
  for (int i = 0; i < 3; ++i)
    strides[i] = dims[i + 1] == 1 ? nominal : cuuint64_t(elem_strides[i]) * elem_bytes;
  const cuuint32_t box[4] = {cuuint32_t(box0), cuuint32_t(rows), 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  return encode(map, type, 4, const_cast<void*>(data), dims, strides, box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The tensor map of view v, a (B, T, heads, D) tensor of T, for boxes of 64 x `rows` rows
// (the operand tiles wgmma reads).
template <typename T>
inline bool EncodeView(CUtensorMap* map, const View& v, int B, int T_len, int heads, int D,
                       int rows) {
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(T_len), cuuint64_t(heads), cuuint64_t(B)};
  const int64_t elem_strides[3] = {v.st, v.sh, v.sb};
  const CUtensorMapDataType type = std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                             : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return EncodeSw128(map, type, sizeof(T), v.data, dims, elem_strides, 64, rows);
}

// The tensor map of the backward's fp32 dQ workspace, contiguous [B][H][T][D], for boxes of
// 32 x `rows` (32 floats: one swizzled 128-byte row) — what the warp-specialised backward's
// bulk reductions add its staged dQ tiles with.
inline bool EncodeDqWorkspace(CUtensorMap* map, float* dq_acc, int B, int T_len, int H, int D,
                              int rows) {
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(T_len), cuuint64_t(H), cuuint64_t(B)};
  const int64_t elem_strides[3] = {D, int64_t(T_len) * D, int64_t(H) * T_len * D};
  return EncodeSw128(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sizeof(float), dq_acc, dims,
                     elem_strides, 32, rows);
}

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
