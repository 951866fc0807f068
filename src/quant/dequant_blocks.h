// Internal to src/quant: one dequantizer per block type, each turning one block into
// block_size floats. dequant.cpp is the single place that maps a Type to one of these.
// Every function follows the formula of spec/quant-formats.md §4 literally, one binary32
// operation at a time in the order written there (the library builds with -ffp-contract=off,
// so no multiply-add is fused behind our back).
#pragma once

#include <cstdint>

#include "strata/quant/scalar.h"
#include "strata/quant/types.h"

namespace strata::quant::detail {

// Blocks are byte arrays with little-endian fields at fixed offsets and no alignment, so fields
// are read byte by byte instead of through structs.
inline uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline float f16_at(const uint8_t* p) { return fp16_to_fp32(le16(p)); }
inline void put_le16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

using BlockDequantFn = void (*)(const uint8_t* block, float* y);

// dequant.cpp: the dispatch; nullptr for a type without a dequantizer.
BlockDequantFn block_dequantizer(Type type);

// F32, F16 and BF16 (one element per "block") live in dequant.cpp beside the dispatch.

// dequant_legacy.cpp: the 32-element formats and the new Q1_0 / Q2_0 (§4.2, §4.3).
void dequant_q4_0(const uint8_t* b, float* y);
void dequant_q4_1(const uint8_t* b, float* y);
void dequant_q5_0(const uint8_t* b, float* y);
void dequant_q5_1(const uint8_t* b, float* y);
void dequant_q8_0(const uint8_t* b, float* y);
void dequant_q8_1(const uint8_t* b, float* y);
void dequant_q1_0(const uint8_t* b, float* y);
void dequant_q2_0(const uint8_t* b, float* y);

// dequant_kquants.cpp: super-blocks of 256 (§4.5).
void dequant_q2_k(const uint8_t* b, float* y);
void dequant_q3_k(const uint8_t* b, float* y);
void dequant_q4_k(const uint8_t* b, float* y);
void dequant_q5_k(const uint8_t* b, float* y);
void dequant_q6_k(const uint8_t* b, float* y);
void dequant_q8_k(const uint8_t* b, float* y);

// dequant_iquants.cpp: lattice and non-linear formats (§4.7).
void dequant_iq2_xxs(const uint8_t* b, float* y);
void dequant_iq2_xs(const uint8_t* b, float* y);
void dequant_iq2_s(const uint8_t* b, float* y);
void dequant_iq3_xxs(const uint8_t* b, float* y);
void dequant_iq3_s(const uint8_t* b, float* y);
void dequant_iq1_s(const uint8_t* b, float* y);
void dequant_iq1_m(const uint8_t* b, float* y);
void dequant_iq4_nl(const uint8_t* b, float* y);
void dequant_iq4_xs(const uint8_t* b, float* y);

// dequant_fp4_ternary.cpp: microscaling FP4 (§4.4) and ternary (§4.6).
void dequant_mxfp4(const uint8_t* b, float* y);
void dequant_nvfp4(const uint8_t* b, float* y);
void dequant_tq1_0(const uint8_t* b, float* y);
void dequant_tq2_0(const uint8_t* b, float* y);

// The scale decodings of §3 that only FP4 uses; random_blocks.cpp picks NVFP4 scales with them.
float e8m0_half(uint8_t e);
float ue4m3_half(uint8_t x);

}  // namespace strata::quant::detail
