// Scalar conversions between binary32 and the 16-bit storage formats (spec/quant-formats.md §3).
// Integer-only bit manipulation: the results do not depend on the FPU mode (FTZ/DAZ, rounding
// mode) or on F16C being present, so the reference path gives the same bits everywhere.
// Header-only and constexpr because every dequantizer calls them per block.
#pragma once

#include <bit>
#include <cstdint>

namespace strata::quant {

// IEEE binary16 -> binary32. Exact for every value: subnormal halves become normal floats,
// inf and NaN carry over (the NaN payload moves to the top of the binary32 mantissa).
constexpr float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);
  // Subnormal half: value = mant * 2^-24. Shift the leading 1 up to bit 10 (the implicit bit),
  // lowering the exponent once per shift; 2^-14 has binary32 biased exponent 113.
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

// binary32 -> binary16, round to nearest, ties to even. Overflow gives +-inf; any NaN gives
// 0x7E00 with the sign kept (the ggml writer's rule, spec §3).
constexpr uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;
  // 65520 = 65504 + half an ulp; the tie goes to the even neighbour, which is inf.
  if (a >= 0x477FF000u) return sign | 0x7C00u;
  const uint32_t e = a >> 23;
  if (e >= 113) {  // normal half: rebias the exponent, round away the low 13 mantissa bits
    uint32_t h = ((e - 112u) << 10) | ((a >> 13) & 0x3FFu);
    const uint32_t rest = a & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
    return static_cast<uint16_t>(sign | h);
  }
  // Subnormal (or zero) half: the result is round(value * 2^24) as an integer. With the
  // implicit bit m = 1.mant * 2^23, value * 2^24 = m >> (126 - e). Below 2^-25 everything
  // rounds to zero (2^-25 itself is a tie and goes to the even 0), so e < 102 needs no shift.
  if (e < 102) return sign;
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14 .. 24
  uint32_t q = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u))) ++q;  // q = 0x400 is the smallest normal: right
  return static_cast<uint16_t>(sign | q);
}

// bfloat16 -> binary32: the 16 bits are the top half of the float.
constexpr float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// binary32 -> bfloat16, round to nearest, ties to even on the dropped 16 bits (overflow rounds
// to inf by the same carry). A NaN keeps its top bits and gets bit 6 set, so it stays a NaN
// even when its payload lived only in the dropped half.
constexpr uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace strata::quant
