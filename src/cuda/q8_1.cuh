// The q8_1 block quantizer's device body, shared by quantize_q8_1_kernel and every kernel that
// produces q8_1 rows itself (the MoE's fused SwiGLU + q8_1), so that all of them write the same
// bytes. The rounding rule is the scalar reference's, see [TAG_Q8_1_RULE] in
// include/strata/cuda/quantize.h; every float operation is spelled with an _rn intrinsic so that
// no contraction or fast-math flag can change a byte.
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

namespace strata::cuda {

// One q8_1 block's codes, as quantize_q8_1_quad forms them: this lane's 4 codes packed (element
// order), the block's d (before its f16 rounding) and the sum of its 32 codes.
struct Q8Quad {
  uint32_t packed;
  float d;
  int sum;
};

// Eight consecutive lanes (part = lane % 8) own one 32-element block, four values each (v, in
// element order part * 4 .. part * 4 + 3). All 32 lanes of the warp must call this together
// (it reduces with full-warp shuffles).
__device__ __forceinline__ Q8Quad q8_1_quad(const float4 v) {
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));

  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  const int q0 = static_cast<int>(roundf(__fmul_rn(v.x, id)));  // roundf: half away from zero
  const int q1 = static_cast<int>(roundf(__fmul_rn(v.y, id)));
  const int q2 = static_cast<int>(roundf(__fmul_rn(v.z, id)));
  const int q3 = static_cast<int>(roundf(__fmul_rn(v.w, id)));
  int sum = q0 + q1 + q2 + q3;
  for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const uint32_t packed = (static_cast<uint32_t>(q0) & 0xFFu) | ((static_cast<uint32_t>(q1) & 0xFFu) << 8) |
                          ((static_cast<uint32_t>(q2) & 0xFFu) << 16) | (static_cast<uint32_t>(q3) << 24);
  return {packed, d, sum};
}

// Writes lane `part`'s share of block `blk` of the q8_1 row at `row` (4-byte aligned).
__device__ __forceinline__ void store_q8_1_quad(const Q8Quad& q, uint8_t* __restrict__ row, const int64_t blk,
                                                const int part) {
  uint8_t* b = row + blk * 36;
  *reinterpret_cast<uint32_t*>(b + 4 + 4 * part) = q.packed;
  if (part == 0) {
    const uint32_t dh = __half_as_ushort(__float2half_rn(q.d));
    const uint32_t sh = __half_as_ushort(__float2half_rn(__fmul_rn(static_cast<float>(q.sum), q.d)));
    *reinterpret_cast<uint32_t*>(b) = dh | (sh << 16);
  }
}

// q8_1_quad, then the store when `live` (uniform per 8-lane group: whether the block exists).
__device__ __forceinline__ void quantize_q8_1_quad(const float4 v, const bool live, uint8_t* __restrict__ row,
                                                   const int64_t blk, const int part) {
  const Q8Quad q = q8_1_quad(v);
  if (live) store_q8_1_quad(q, row, blk, part);
}

}  // namespace strata::cuda
