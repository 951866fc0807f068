// 16-byte vectors of F32, F16 or BF16 weights as floats, for the kernels that stream float
// weights (the float mat-vec in mmvf.cu, the fused HC module in hc.cu). Every conversion is
// exact (f16 and bf16 are subsets of f32), so the two read the same values.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "strata/quant/types.h"

namespace strata::cuda {

template <quant::Type WT>
constexpr int kWeightsPerVec = WT == quant::Type::F32 ? 4 : 8;  // weights per 16-byte vector
template <quant::Type WT>
constexpr int kWeightBytes = WT == quant::Type::F32 ? 4 : 2;

// f[0], f[1] = the two 16-bit weights (F16 or BF16) packed in u, in memory order.
template <quant::Type WT>
__device__ __forceinline__ void weight_pair_floats(const uint32_t u, float* f) {
  static_assert(WT == quant::Type::F16 || WT == quant::Type::BF16, "a 16-bit float weight type");
  if constexpr (WT == quant::Type::F16) {
    f[0] = __half2float(__ushort_as_half(static_cast<unsigned short>(u & 0xFFFFu)));
    f[1] = __half2float(__ushort_as_half(static_cast<unsigned short>(u >> 16)));
  } else {
    f[0] = __uint_as_float(u << 16);
    f[1] = __uint_as_float(u & 0xFFFF0000u);
  }
}

// f[0 .. kWeightsPerVec<WT>) = the weights packed in w, in memory order.
template <quant::Type WT>
__device__ __forceinline__ void weight_floats(const uint4 w, float* f) {
  static_assert(WT == quant::Type::F32 || WT == quant::Type::F16 || WT == quant::Type::BF16, "a float weight type");
  if constexpr (WT == quant::Type::F32) {
    f[0] = __uint_as_float(w.x);
    f[1] = __uint_as_float(w.y);
    f[2] = __uint_as_float(w.z);
    f[3] = __uint_as_float(w.w);
  } else {
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) weight_pair_floats<WT>(u[i], f + 2 * i);
  }
}

}  // namespace strata::cuda
