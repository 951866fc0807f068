// Per-type block decoding shared by every kernel that reads quantized weights (mmvq, get_rows).
//
// One unit of work is a *group*: 8 consecutive elements of a 32-element *chunk* (the span of one
// q8_1 activation block). `Dec<type>::group(b, ch, g, tb)` returns the group's 8 integer codes as
// int8 bytes (lo = elements 0-3, hi = elements 4-7, element 0 in the lowest byte) such that the
// reference value of element e is
//
//     y = scale(b, ch, g >> 1) * code_e (+ min(b, ch) for the types with kMin)
//
// exactly (spec/quant-formats.md §6: every product here is exact in binary32, so the value equals
// the reference dequantizer's bit for bit; get_rows relies on that and `strata parity` checks it).
// Scales that the format stores per 16 elements (Q6_K, IQ2_XS, IQ2_S, IQ1_M) have kSplit: the
// half is g >> 1. IQ1_M's +-1/8 delta is folded into the codes (8v +- 1) and its scale carries
// the 1/8.
//
// Everything is __host__ __device__ with one code path (byte tricks instead of SIMD intrinsics),
// so `strata parity --host-only` checks the very same decoding on a machine without a GPU.
// This file owns decoding only: no loads of whole blocks, no dot products.
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_fp16.h>

#include "strata/quant/scalar.h"
#include "strata/quant/tables_data.h"
#include "strata/quant/types.h"

#define STRATA_HD __host__ __device__ __forceinline__

namespace strata::cuda::qd {

using quant::Type;

// ---- byte access (blocks are 2-byte aligned: every listed block size is even) -------------

STRATA_HD uint32_t ld8(const uint8_t* p, int o) { return p[o]; }
STRATA_HD uint32_t ld16(const uint8_t* p, int o) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const uint16_t*>(p + o);
#else
  uint16_t v;
  std::memcpy(&v, p + o, 2);
  return v;
#endif
}
// A little-endian u32 at a 2-byte aligned offset.
STRATA_HD uint32_t ld32(const uint8_t* p, int o) { return ld16(p, o) | (ld16(p, o + 2) << 16); }

STRATA_HD float f16_bits_to_f32(uint32_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#else
  return quant::fp16_to_fp32(static_cast<uint16_t>(h));
#endif
}
STRATA_HD float f16_at(const uint8_t* p, int o) { return f16_bits_to_f32(ld16(p, o)); }

// Plain IEEE binary32 operations, never contracted into an FMA (the reference rounds each one).
STRATA_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
STRATA_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

STRATA_HD int popc(uint32_t v) {
#ifdef __CUDA_ARCH__
  return __popc(v);
#else
  return __builtin_popcount(v);
#endif
}

// __byte_perm(x, y, s): output byte i is byte (s >> 4i) & 7 of the 8-byte value y:x.
STRATA_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return r;
#endif
}

// ---- per-byte integer tricks (no carries between bytes under the stated ranges) -----------

// a_i - c_i per byte, for a_i in [0, 127] and c_i in [0, 128]: bias each byte by 0x80 so that
// the subtraction never borrows, then remove the bias.
STRATA_HD uint32_t sub_bytes(uint32_t a, uint32_t c) { return ((a | 0x80808080u) - c) ^ 0x80808080u; }

// Negate the bytes of v where m has 0xFF (two's complement), for v_i in [1, 255]: (v ^ 0xFF) + 1
// = 256 - v never carries when v >= 1. Lattice grid bytes are never 0.
STRATA_HD uint32_t negate_bytes(uint32_t v, uint32_t m) { return (v ^ m) + (m & 0x01010101u); }

// Bits 0..3 of b -> 0xFF or 0x00 in bytes 0..3.
STRATA_HD uint32_t bits_to_byte_mask(uint32_t b) { return ((b * 0x00204081u) & 0x01010101u) * 0xFFu; }
// Bits 0..3 of b -> 0x01 or 0x00 in bytes 0..3.
STRATA_HD uint32_t bits_to_bytes(uint32_t b) { return (b * 0x00204081u) & 0x01010101u; }

// Two-bit fields 0..3 of the low byte of x -> bytes 0..3.
STRATA_HD uint32_t spread2(uint32_t x) { return (x | (x << 6) | (x << 12) | (x << 18)) & 0x03030303u; }

// The 7 stored sign bits of IQ2_XXS / IQ2_XS / IQ3_XXS plus the parity bit that makes the count
// of negative signs even: ksigns_iq2xs[k] computed instead of looked up.
STRATA_HD uint32_t ksigns(uint32_t k7) { return k7 | (static_cast<uint32_t>(popc(k7) & 1) << 7); }

// Apply 8 sign bits s8 (bit e set: negate element e) to the group's grid bytes.
STRATA_HD void apply_signs(uint32_t s8, uint32_t& lo, uint32_t& hi) {
  lo = negate_bytes(lo, bits_to_byte_mask(s8 & 15));
  hi = negate_bytes(hi, bits_to_byte_mask(s8 >> 4));
}

// kvalues_iq4nl as four little-endian words, for byte_perm lookups.
struct Iq4nlWords {
  uint32_t w[4];
};
constexpr Iq4nlWords make_iq4nl_words() {
  Iq4nlWords r{};
  for (int i = 0; i < 16; ++i) r.w[i / 4] |= static_cast<uint32_t>(static_cast<uint8_t>(quant::kvalues_iq4nl[i])) << (8 * (i % 4));
  return r;
}
inline constexpr Iq4nlWords kIq4nlWords = make_iq4nl_words();

// Bytes 0..3 of `codes` (each 0..15) -> kvalues_iq4nl[code] as int8 bytes. Two byte_perms pick
// from the low and the high half of the table; a third chooses per byte by the code's bit 3.
STRATA_HD uint32_t lut_iq4nl(uint32_t codes) {
  const uint32_t w0 = kIq4nlWords.w[0], w1 = kIq4nlWords.w[1], w2 = kIq4nlWords.w[2], w3 = kIq4nlWords.w[3];
  // Pack the four bytes' low 3 bits into four selector nibbles.
  uint32_t s = (codes & 0x07070707u);
  s = s | (s >> 4);
  s = (s & 0xFFu) | ((s >> 8) & 0xFF00u);
  const uint32_t low = byte_perm(w0, w1, s);
  const uint32_t high = byte_perm(w2, w3, s);
  uint32_t h = (codes & 0x08080808u) >> 1;  // 4 in each byte whose code is >= 8
  h = h | (h >> 4);
  h = (h & 0xFFu) | ((h >> 8) & 0xFF00u);
  return byte_perm(low, high, 0x3210u | h);
}


// ---- lookup tables -----------------------------------------------------------------------------

// Where the lattice grids live: smem copies in mmvq, global copies in get_rows, the host arrays in
// the host check. Only the pointers a type needs are set.
struct Tables {
  const uint64_t* iq2xxs = nullptr;
  const uint64_t* iq2xs = nullptr;
  const uint64_t* iq2s = nullptr;
  const uint32_t* iq3xxs = nullptr;
  const uint32_t* iq3s = nullptr;
  const uint32_t* iq1s = nullptr;  // iq1s_grid_gpu: element e<4 is the low nibble of byte e, e>=4 the
                                   // high nibble of byte e-4, each holding v+1 (0, 1, 2)
};

inline Tables host_tables() {
  Tables t;
  t.iq2xxs = quant::iq2xxs_grid;
  t.iq2xs = quant::iq2xs_grid;
  t.iq2s = quant::iq2s_grid;
  t.iq3xxs = quant::iq3xxs_grid;
  t.iq3s = quant::iq3s_grid;
  t.iq1s = quant::iq1s_grid_gpu;
  return t;
}

// Which table (and how many bytes of it) a type reads; 0 bytes for none.
enum class Grid { None, Iq2xxs, Iq2xs, Iq2s, Iq3xxs, Iq3s, Iq1s };

struct Group {
  uint32_t lo, hi;  // int8 codes of elements 0-3 and 4-7
};

// The IQ4_NL values of 8 codes with 8 byte_perms instead of lut_iq4nl's 2 x 3 plus the selector
// packing: x and y hold 4 code bytes each (codes in bits sh .. sh + 3 of each byte); the result
// is {lut_iq4nl(codes of x), lut_iq4nl(codes of y)}. The codes are packed as nibbles, byte i of
// sel = code i | code 4+i << 4, so one byte_perm selector word serves 4 codes: the low 3 bits of
// each nibble pick within an 8-entry half of the table, bit 3 picks the half (a third byte_perm
// per 4 codes), and two final byte_perms undo the interleave (0, 4, 1, 5 | 2, 6, 3, 7).
STRATA_HD Group lut_iq4nl_x8(uint32_t x, uint32_t y, int sh) {
  const uint32_t w0 = kIq4nlWords.w[0], w1 = kIq4nlWords.w[1], w2 = kIq4nlWords.w[2], w3 = kIq4nlWords.w[3];
  const uint32_t sel = ((x >> sh) & 0x0F0F0F0Fu) | (((y >> sh) & 0x0F0F0F0Fu) << 4);
  const uint32_t idx = sel & 0x77777777u;                     // index within a half
  const uint32_t half = 0x32103210u | ((sel & 0x88888888u) >> 1);  // byte k: k, or 4 + k for the upper half
  const uint32_t a = byte_perm(byte_perm(w0, w1, idx), byte_perm(w2, w3, idx), half);                    // codes 0 4 1 5
  const uint32_t b = byte_perm(byte_perm(w0, w1, idx >> 16), byte_perm(w2, w3, idx >> 16), half >> 16);  // codes 2 6 3 7
  return {byte_perm(a, b, 0x6420u), byte_perm(a, b, 0x7531u)};
}

// ---- the types ------------------------------------------------------------------------------
// QK elements and TS bytes per block, CPB = QK / 32 chunks per block. kMin: value carries + min.

template <Type T>
struct Dec;

// Low or high nibbles of 8 bytes at p+o for group g of a 32-element "nib(j)" layout (Q4_0, IQ4_NL,
// IQ4_XS): groups 0/1 are the low nibbles of bytes 0-7 / 8-15, groups 2/3 their high nibbles.
STRATA_HD Group nibbles_q4(const uint8_t* qs, int g) {
  const int o = (g & 1) * 8, sh = (g >> 1) * 4;
  return {(ld32(qs, o) >> sh) & 0x0F0F0F0Fu, (ld32(qs, o + 4) >> sh) & 0x0F0F0F0Fu};
}

template <>
struct Dec<Type::Q4_0> {
  static constexpr int QK = 32, TS = 18;
  static constexpr bool kSplit = false, kMin = false;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int, int g, const Tables&) {
    const Group n = nibbles_q4(b + 2, g);
    return {sub_bytes(n.lo, 0x08080808u), sub_bytes(n.hi, 0x08080808u)};
  }
  STRATA_HD static float scale(const uint8_t* b, int, int) { return f16_at(b, 0); }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

// Q5_0 / Q5_1: bit j of qh is the fifth bit of element j.
STRATA_HD Group q5_codes(const uint8_t* b, int qh_off, int qs_off, int g) {
  const Group n = nibbles_q4(b + qs_off, g);
  const uint32_t hb = (ld32(b, qh_off) >> (8 * g)) & 0xFFu;
  return {n.lo | (bits_to_bytes(hb & 15) << 4), n.hi | (bits_to_bytes(hb >> 4) << 4)};
}

template <>
struct Dec<Type::Q5_0> {
  static constexpr int QK = 32, TS = 22;
  static constexpr bool kSplit = false, kMin = false;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int, int g, const Tables&) {
    const Group q = q5_codes(b, 2, 6, g);
    return {sub_bytes(q.lo, 0x10101010u), sub_bytes(q.hi, 0x10101010u)};
  }
  STRATA_HD static float scale(const uint8_t* b, int, int) { return f16_at(b, 0); }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

template <>
struct Dec<Type::Q5_1> {
  static constexpr int QK = 32, TS = 24;
  static constexpr bool kSplit = false, kMin = true;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int, int g, const Tables&) { return q5_codes(b, 4, 8, g); }
  STRATA_HD static float scale(const uint8_t* b, int, int) { return f16_at(b, 0); }
  STRATA_HD static float min(const uint8_t* b, int) { return f16_at(b, 2); }
};

template <>
struct Dec<Type::Q8_0> {
  static constexpr int QK = 32, TS = 34;
  static constexpr bool kSplit = false, kMin = false;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int, int g, const Tables&) { return {ld32(b, 2 + 8 * g), ld32(b, 6 + 8 * g)}; }
  STRATA_HD static float scale(const uint8_t* b, int, int) { return f16_at(b, 0); }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

template <>
struct Dec<Type::IQ4_NL> {
  static constexpr int QK = 32, TS = 18;
  static constexpr bool kSplit = false, kMin = false;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int, int g, const Tables&) {
    const int o = 2 + (g & 1) * 8;  // nibbles_q4's bytes and shift for group g
    return lut_iq4nl_x8(ld32(b, o), ld32(b, o + 4), (g >> 1) * 4);
  }
  STRATA_HD static float scale(const uint8_t* b, int, int) { return f16_at(b, 0); }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

// Q2_0: 64 elements, codes c - 1 in {-1, 0, 1, 2}, 4 codes per byte from the low bits up.
template <>
struct Dec<Type::Q2_0> {
  static constexpr int QK = 64, TS = 18;
  static constexpr bool kSplit = false, kMin = false;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables&) {
    const uint32_t x = ld16(b, 2 + 8 * ch + 2 * g);  // elements 32ch + 8g .. +7
    // Spread the 8 two-bit codes to nibbles (nibble k = code k), then one byte_perm per 4 codes
    // looks up c - 1 in the word {-1, 0, 1, 2}: fewer operations than spread2 + sub_bytes per 4.
    uint32_t t = (x | (x << 8)) & 0x00FF00FFu;
    t = (t | (t << 4)) & 0x0F0F0F0Fu;
    t = (t | (t << 2)) & 0x33333333u;
    constexpr uint32_t kValues = 0x020100FFu;
    return {byte_perm(kValues, 0u, t), byte_perm(kValues, 0u, t >> 16)};
  }
  STRATA_HD static float scale(const uint8_t* b, int, int) { return f16_at(b, 0); }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

// Q4_K / Q5_K: six-bit (scale, min) pair of sub-block `sb` from the 12 packed bytes at S.
STRATA_HD void scale_min_k4(const uint8_t* S, int sb, int& sc, int& m) {
  if (sb < 4) {
    sc = S[sb] & 63;
    m = S[sb + 4] & 63;
  } else {
    sc = (S[sb + 4] & 15) | ((S[sb - 4] >> 6) << 4);
    m = (S[sb + 4] >> 4) | ((S[sb] >> 6) << 4);
  }
}

// scale_min_k4 of four sub-blocks at once: with the 12 packed bytes as the words s0 (bytes 0-3),
// s4 (4-7) and s8 (8-11), byte j of sc / mn is the scale / min of sub-block 4 h + j (h = 0, 1).
STRATA_HD void k_scale_min_words(uint32_t s0, uint32_t s4, uint32_t s8, int h, uint32_t& sc, uint32_t& mn) {
  if (h == 0) {
    sc = s0 & 0x3F3F3F3Fu;
    mn = s4 & 0x3F3F3F3Fu;
  } else {
    sc = (s8 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
    mn = ((s8 >> 4) & 0x0F0F0F0Fu) | ((s4 >> 2) & 0x30303030u);
  }
}

// Q4_K / Q5_K nibbles: sub-block ch uses the low (even ch) or high (odd ch) nibbles of
// qs[32 * (ch >> 1) + k].
STRATA_HD Group nibbles_k(const uint8_t* qs, int ch, int g) {
  const int o = 32 * (ch >> 1) + 8 * g, sh = 4 * (ch & 1);
  return {(ld32(qs, o) >> sh) & 0x0F0F0F0Fu, (ld32(qs, o + 4) >> sh) & 0x0F0F0F0Fu};
}

// Q4_K and Q5_K share the super-block header: d and dmin (f16) at 0 and 2, then 12 bytes of
// 6-bit scales and mins; chunk ch takes pair ch of them.
struct KScaleMin {
  STRATA_HD static float scale(const uint8_t* b, int ch, int) {
    int sc, m;
    scale_min_k4(b + 4, ch, sc, m);
    return mul_rn(f16_at(b, 0), static_cast<float>(sc));
  }
  // y = (d*sc)*q - dmin*m; the min is returned negated so that y = scale*q + min.
  STRATA_HD static float min(const uint8_t* b, int ch) {
    int sc, m;
    scale_min_k4(b + 4, ch, sc, m);
    return -mul_rn(f16_at(b, 2), static_cast<float>(m));
  }
};

template <>
struct Dec<Type::Q4_K> : KScaleMin {
  static constexpr int QK = 256, TS = 144;
  static constexpr bool kSplit = false, kMin = true;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables&) { return nibbles_k(b + 16, ch, g); }
};

template <>
struct Dec<Type::Q5_K> : KScaleMin {
  static constexpr int QK = 256, TS = 176;
  static constexpr bool kSplit = false, kMin = true;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables&) {
    const Group n = nibbles_k(b + 48, ch, g);
    const uint32_t h0 = (ld32(b, 16 + 8 * g) >> ch) & 0x01010101u;  // bit ch of qh[k]
    const uint32_t h1 = (ld32(b, 20 + 8 * g) >> ch) & 0x01010101u;
    return {n.lo | (h0 << 4), n.hi | (h1 << 4)};
  }
};

// Q6_K: chunk ch = (n = ch >> 2, k = ch & 3); codes (nibble | hi << 4) - 32; int8 scale per 16.
template <>
struct Dec<Type::Q6_K> {
  static constexpr int QK = 256, TS = 210;
  static constexpr bool kSplit = true, kMin = false;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables&) {
    const int n = ch >> 2, k = ch & 3;
    const int ql = 64 * n + 32 * (k & 1) + 8 * g, sh = 4 * (k >> 1);
    const int qh = 128 + 32 * n + 8 * g;
    const uint32_t lo = ((ld32(b, ql) >> sh) & 0x0F0F0F0Fu) | (((ld32(b, qh) >> (2 * k)) & 0x03030303u) << 4);
    const uint32_t hi = ((ld32(b, ql + 4) >> sh) & 0x0F0F0F0Fu) | (((ld32(b, qh + 4) >> (2 * k)) & 0x03030303u) << 4);
    return {sub_bytes(lo, 0x20202020u), sub_bytes(hi, 0x20202020u)};
  }
  STRATA_HD static float scale(const uint8_t* b, int ch, int half) {
    return mul_rn(f16_at(b, 208), static_cast<float>(static_cast<int8_t>(b[192 + 2 * ch + half])));
  }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

// IQ2_XXS: per sub-block 4 grid indices (one per group) and a word of 4x7 sign bits + 4-bit scale.
template <>
struct Dec<Type::IQ2_XXS> {
  static constexpr int QK = 256, TS = 66;
  static constexpr bool kSplit = false, kMin = false;
  static constexpr Grid kGrid = Grid::Iq2xxs;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables& tb) {
    const uint64_t grid = tb.iq2xxs[b[2 + 8 * ch + g]];
    const uint32_t w1 = ld32(b, 6 + 8 * ch);
    uint32_t lo = static_cast<uint32_t>(grid), hi = static_cast<uint32_t>(grid >> 32);
    apply_signs(ksigns((w1 >> (7 * g)) & 127u), lo, hi);
    return {lo, hi};
  }
  STRATA_HD static float scale(const uint8_t* b, int ch, int) {
    const uint32_t w1 = ld32(b, 6 + 8 * ch);
    return mul_rn(mul_rn(f16_at(b, 0), add_rn(0.5f, static_cast<float>(w1 >> 28))), 0.25f);
  }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

// IQ2_XS / IQ2_S: the 4-bit scale of each half of the sub-block.
STRATA_HD float iq2_half_scale(const uint8_t* b, int scales_off, int ch, int half) {
  const uint32_t sc = b[scales_off + ch];
  const uint32_t s4 = half ? (sc >> 4) : (sc & 15);
  return mul_rn(mul_rn(f16_at(b, 0), add_rn(0.5f, static_cast<float>(s4))), 0.25f);
}

template <>
struct Dec<Type::IQ2_XS> {
  static constexpr int QK = 256, TS = 74;
  static constexpr bool kSplit = true, kMin = false;
  static constexpr Grid kGrid = Grid::Iq2xs;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables& tb) {
    const uint32_t v = ld16(b, 2 + 2 * (4 * ch + g));
    const uint64_t grid = tb.iq2xs[v & 511u];
    uint32_t lo = static_cast<uint32_t>(grid), hi = static_cast<uint32_t>(grid >> 32);
    apply_signs(ksigns(v >> 9), lo, hi);
    return {lo, hi};
  }
  STRATA_HD static float scale(const uint8_t* b, int ch, int half) { return iq2_half_scale(b, 66, ch, half); }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

template <>
struct Dec<Type::IQ2_S> {
  static constexpr int QK = 256, TS = 82;
  static constexpr bool kSplit = true, kMin = false;
  static constexpr Grid kGrid = Grid::Iq2s;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables& tb) {
    const uint32_t idx = b[2 + 4 * ch + g] | (((static_cast<uint32_t>(b[66 + ch]) >> (2 * g)) & 3u) << 8);
    const uint64_t grid = tb.iq2s[idx];
    uint32_t lo = static_cast<uint32_t>(grid), hi = static_cast<uint32_t>(grid >> 32);
    apply_signs(b[34 + 4 * ch + g], lo, hi);  // 8 explicit sign bits
    return {lo, hi};
  }
  STRATA_HD static float scale(const uint8_t* b, int ch, int half) { return iq2_half_scale(b, 74, ch, half); }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

// IQ3_XXS: two 4-value grid entries per group, signs and scale in the sub-block's word.
template <>
struct Dec<Type::IQ3_XXS> {
  static constexpr int QK = 256, TS = 98;
  static constexpr bool kSplit = false, kMin = false;
  static constexpr Grid kGrid = Grid::Iq3xxs;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables& tb) {
    const uint32_t idx = ld16(b, 2 + 8 * ch + 2 * g);
    uint32_t lo = tb.iq3xxs[idx & 0xFFu], hi = tb.iq3xxs[idx >> 8];
    apply_signs(ksigns((ld32(b, 66 + 4 * ch) >> (7 * g)) & 127u), lo, hi);
    return {lo, hi};
  }
  STRATA_HD static float scale(const uint8_t* b, int ch, int) {
    const uint32_t w = ld32(b, 66 + 4 * ch);
    return mul_rn(mul_rn(f16_at(b, 0), add_rn(0.5f, static_cast<float>(w >> 28))), 0.5f);
  }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

// IQ3_S: 9-bit indices (low byte + one bit of qh), 8 explicit sign bits, 4-bit odd scale.
template <>
struct Dec<Type::IQ3_S> {
  static constexpr int QK = 256, TS = 110;
  static constexpr bool kSplit = false, kMin = false;
  static constexpr Grid kGrid = Grid::Iq3s;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables& tb) {
    const uint32_t qh = b[66 + ch];
    const uint32_t idx = ld16(b, 2 + 8 * ch + 2 * g);
    uint32_t lo = tb.iq3s[(idx & 0xFFu) | (((qh >> (2 * g)) & 1u) << 8)];
    uint32_t hi = tb.iq3s[(idx >> 8) | (((qh >> (2 * g + 1)) & 1u) << 8)];
    apply_signs(b[74 + 4 * ch + g], lo, hi);
    return {lo, hi};
  }
  STRATA_HD static float scale(const uint8_t* b, int ch, int) {
    const uint32_t sc = b[106 + (ch >> 1)];
    const uint32_t s4 = (ch & 1) ? (sc >> 4) : (sc & 15);
    return mul_rn(f16_at(b, 0), static_cast<float>(1 + 2 * s4));
  }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

// IQ1_M: value = dl * (v + delta), v in {-1, 0, 1}, delta = +-1/8 per group, dl per half.
// Codes are 8v + 8delta in {-9, -7, -1, 1, 7, 9}; the scale is dl / 8 (exact).
template <>
struct Dec<Type::IQ1_M> {
  static constexpr int QK = 256, TS = 56;
  static constexpr bool kSplit = true, kMin = false;
  static constexpr Grid kGrid = Grid::Iq1s;
  STRATA_HD static float d(const uint8_t* b) {
    const uint32_t w0 = ld16(b, 48), w1 = ld16(b, 50), w2 = ld16(b, 52), w3 = ld16(b, 54);
    return f16_bits_to_f32((w0 >> 12) | ((w1 >> 8) & 0x00F0u) | ((w2 >> 4) & 0x0F00u) | (w3 & 0xF000u));
  }
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables& tb) {
    const uint32_t qh = b[32 + 2 * ch + (g >> 1)];
    const uint32_t hn = (g & 1) ? (qh >> 4) : (qh & 15);
    const uint32_t u = tb.iq1s[b[4 * ch + g] | ((hn & 7u) << 8)];
    // 8(v+1) - c with c = 9 for delta = -1/8 (hn bit 3 set), 7 for +1/8.
    const uint32_t c = (hn & 8u) ? 0x09090909u : 0x07070707u;
    return {sub_bytes((u & 0x0F0F0F0Fu) << 3, c), sub_bytes(((u >> 4) & 0x0F0F0F0Fu) << 3, c)};
  }
  STRATA_HD static float scale(const uint8_t* b, int ch, int half) {
    const uint32_t w = ld16(b, 48 + 2 * (ch >> 1));
    const uint32_t s3 = (w >> (6 * (ch & 1) + 3 * half)) & 7u;
    return mul_rn(mul_rn(d(b), static_cast<float>(2 * s3 + 1)), 0.125f);
  }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

template <>
struct Dec<Type::IQ4_XS> {
  static constexpr int QK = 256, TS = 136;
  static constexpr bool kSplit = false, kMin = false;
  static constexpr Grid kGrid = Grid::None;
  STRATA_HD static Group group(const uint8_t* b, int ch, int g, const Tables&) {
    const int o = 8 + 16 * ch + (g & 1) * 8;  // nibbles_q4's bytes and shift for group g
    return lut_iq4nl_x8(ld32(b, o), ld32(b, o + 4), (g >> 1) * 4);
  }
  STRATA_HD static float scale(const uint8_t* b, int ch, int) {
    const uint32_t ls = ((static_cast<uint32_t>(b[4 + (ch >> 1)]) >> (4 * (ch & 1))) & 15u) | (((ld16(b, 2) >> (2 * ch)) & 3u) << 4);
    return mul_rn(f16_at(b, 0), static_cast<float>(static_cast<int>(ls) - 32));
  }
  STRATA_HD static float min(const uint8_t*, int) { return 0.0f; }
};

// The element value of byte i of a code word, as the reference computes it (exact products).
template <Type T>
STRATA_HD float value_of(uint32_t codes, int i, float scale, float min) {
  const float q = static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(codes >> (8 * i))));
  const float p = mul_rn(scale, q);
  if constexpr (Dec<T>::kMin) return add_rn(p, min);
  return p;
}

// Dequantizes one group of 8 elements of block b (chunk ch, group g) into y[0..7].
template <Type T>
STRATA_HD void dequant_group(const uint8_t* b, int ch, int g, const Tables& tb, float* y) {
  const Group q = Dec<T>::group(b, ch, g, tb);
  const float s = Dec<T>::scale(b, ch, g >> 1);
  const float m = Dec<T>::min(b, ch);
  for (int i = 0; i < 4; ++i) y[i] = value_of<T>(q.lo, i, s, m);
  for (int i = 0; i < 4; ++i) y[4 + i] = value_of<T>(q.hi, i, s, m);
}

// ---- Q4_K / Q5_K / IQ4_XS from aligned blocks ------------------------------------------------
// A 256-element step of these types is one block, and their blocks (144 / 176 / 136 bytes) are
// multiples of 16 (Q4_K, Q5_K) or of 8 (IQ4_XS). So wherever rows start 16-byte aligned and a
// step's copy keeps the block's offset mod 16 (mmvq's staged steps), every block is 16- (K types)
// or 8-byte (IQ4_XS) aligned. These read such a block with wide loads: the head (d, dmin / the
// scale bits) once per block and 8 bytes per code word pair, instead of the 2-byte and 1-byte
// loads that Dec must use for 2-byte aligned blocks (Q5_K chunk, per row: 16 shared loads become
// 2, plus the head once per step). Same bits, scales and mins (same roundings) as Dec<T>.
template <Type T>
inline constexpr bool kWideDecode = T == Type::Q4_K || T == Type::Q5_K || T == Type::IQ4_XS;

struct WideHead {
  uint32_t w[4];  // K types: bytes 0-15 (d | dmin << 16, 12 scale bytes); IQ4_XS: bytes 0-7
};

template <class V>
STRATA_HD V ld_aligned(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const V*>(p);
#else
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
#endif
}

template <Type T>
STRATA_HD WideHead wide_head(const uint8_t* b) {
  static_assert(kWideDecode<T>, "Q4_K / Q5_K / IQ4_XS only");
  if constexpr (T == Type::IQ4_XS) {
    const uint2 v = ld_aligned<uint2>(b);  // d | scales_h << 16, scales_l[4]
    return {{v.x, v.y, 0u, 0u}};
  } else {
    const uint4 v = ld_aligned<uint4>(b);
    return {{v.x, v.y, v.z, v.w}};
  }
}

// Byte i (0..11) of a K type's packed scales.
STRATA_HD uint32_t k_scale_byte(const WideHead& h, int i) { return (h.w[1 + (i >> 2)] >> (8 * (i & 3))) & 0xFFu; }

// scale_min_k4 on the head's words.
STRATA_HD void k_scale_min(const WideHead& h, int sb, int& sc, int& m) {
  if (sb < 4) {
    sc = static_cast<int>(k_scale_byte(h, sb) & 63);
    m = static_cast<int>(k_scale_byte(h, sb + 4) & 63);
  } else {
    sc = static_cast<int>((k_scale_byte(h, sb + 4) & 15) | ((k_scale_byte(h, sb - 4) >> 6) << 4));
    m = static_cast<int>((k_scale_byte(h, sb + 4) >> 4) | ((k_scale_byte(h, sb) >> 6) << 4));
  }
}

// Dec<T>::scale(b, ch, 0) of the block whose head is h.
template <Type T>
STRATA_HD float wide_scale(const WideHead& h, int ch) {
  if constexpr (T == Type::IQ4_XS) {
    const uint32_t ls = ((h.w[1] >> (8 * (ch >> 1) + 4 * (ch & 1))) & 15u) | (((h.w[0] >> (16 + 2 * ch)) & 3u) << 4);
    return mul_rn(f16_bits_to_f32(h.w[0] & 0xFFFFu), static_cast<float>(static_cast<int>(ls) - 32));
  } else {
    int sc, m;
    k_scale_min(h, ch, sc, m);
    return mul_rn(f16_bits_to_f32(h.w[0] & 0xFFFFu), static_cast<float>(sc));
  }
}

// Dec<T>::min(b, ch) of the block whose head is h.
template <Type T>
STRATA_HD float wide_min(const WideHead& h, int ch) {
  if constexpr (T == Type::IQ4_XS) {
    return 0.0f;
  } else {
    int sc, m;
    k_scale_min(h, ch, sc, m);
    return -mul_rn(f16_bits_to_f32(h.w[0] >> 16), static_cast<float>(m));
  }
}

// Dec<T>::group(b, ch, g) for an aligned block b.
template <Type T>
STRATA_HD Group wide_group(const uint8_t* b, int ch, int g) {
  static_assert(kWideDecode<T>, "Q4_K / Q5_K / IQ4_XS only");
  if constexpr (T == Type::IQ4_XS) {
    // nibbles_q4 of the chunk's 16 bytes at b + 8 + 16 ch: groups 0/1 the low nibbles of bytes
    // 0-7 / 8-15, groups 2/3 their high nibbles.
    const uint2 n = ld_aligned<uint2>(b + 8 + 16 * ch + 8 * (g & 1));
    return lut_iq4nl_x8(n.x, n.y, 4 * (g >> 1));
  } else {
    constexpr int kQs = T == Type::Q5_K ? 48 : 16;  // qs after the head (and Q5_K's 32 qh bytes)
    const int sh = 4 * (ch & 1);
    const uint2 n = ld_aligned<uint2>(b + kQs + 32 * (ch >> 1) + 8 * g);
    Group r{(n.x >> sh) & 0x0F0F0F0Fu, (n.y >> sh) & 0x0F0F0F0Fu};
    if constexpr (T == Type::Q5_K) {
      const uint2 h = ld_aligned<uint2>(b + 16 + 8 * g);  // qh[8g .. 8g+7]
      r.lo |= ((h.x >> ch) & 0x01010101u) << 4;
      r.hi |= ((h.y >> ch) & 0x01010101u) << 4;
    }
    return r;
  }
}

// X-macro of the quantized weight types the kernels serve (the published packs' types).
// [TAG_MMVQ_TYPES] keep in sync with the instance list in src/cuda/CMakeLists.txt.
#define STRATA_MMVQ_QUANT_TYPES(X) \
  X(Q4_0) X(Q5_0) X(Q5_1) X(Q8_0) X(IQ4_NL) X(Q2_0) X(Q4_K) X(Q5_K) X(Q6_K) \
  X(IQ2_XXS) X(IQ2_XS) X(IQ2_S) X(IQ3_XXS) X(IQ3_S) X(IQ1_M) X(IQ4_XS)

}  // namespace strata::cuda::qd
