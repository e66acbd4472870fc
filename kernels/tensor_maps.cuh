// tensor_maps.cuh: the TMA tensor maps of the warp-specialised kernels (host side): the
// driver's encoder, looked up through the runtime, and the map of a strided (B, T, heads, d)
// view for boxes of 64 elements x `rows` rows in the 128-byte swizzle wgmma reads.
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
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// The tensor map of view v, a (B, T, heads, D) tensor of T, for boxes of 64 x `rows` rows
// in the 128-byte swizzle; rows past T read as zeros. A dimension of size 1 gets a nominal
// stride (the encoder wants one that is a nonzero multiple of 16 bytes).
template <typename T>
inline bool EncodeView(CUtensorMap* map, const View& v, int B, int T_len, int heads, int D, int rows) {
  const EncodeTiled encode = Encoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(T_len), cuuint64_t(heads), cuuint64_t(B)};
  const int64_t elem_strides[3] = {v.st, v.sh, v.sb};
  cuuint64_t span = D * sizeof(T);  // bytes from the first element to past the last
  for (int i = 0; i < 3; ++i) span += cuuint64_t(elem_strides[i]) * (dims[i + 1] - 1) * sizeof(T);
  const cuuint64_t nominal = (span + 15) / 16 * 16;
  cuuint64_t strides[3];
  for (int i = 0; i < 3; ++i)
    strides[i] = dims[i + 1] == 1 ? nominal : cuuint64_t(elem_strides[i]) * sizeof(T);
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  const CUtensorMapDataType dt =
      std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return encode(map, dt, 4, v.data, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
