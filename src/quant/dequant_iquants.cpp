// i-quants: lattice codebooks with sign codes (IQ2_*, IQ3_*), the ternary-plus-delta IQ1_*, and
// the non-linear IQ4_* levels (spec/quant-formats.md §4.7). Notation as in the spec: sub-block
// b = j >> 5, group g = (j >> 3) & 3 of 8 elements, position e = j & 7.
#include "dequant_blocks.h"
#include "strata/quant/tables_data.h"

namespace strata::quant::detail {
namespace {

// Byte e (least significant first) of a 64- or 32-bit grid entry.
inline float grid8(const uint64_t* T, uint32_t i, int e) {
  return static_cast<float>(static_cast<uint8_t>(T[i] >> (8 * e)));
}
inline float grid4(const uint32_t* T, uint32_t i, int e) {
  return static_cast<float>(static_cast<uint8_t>(T[i] >> (8 * e)));
}
// iq1s_grid holds signed bytes in {-1, 0, +1}.
inline float grid8_signed(uint32_t i, int e) {
  return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(iq1s_grid[i] >> (8 * e))));
}

// "±": negate when sign bit e is set. Negation is exact, so it commutes with the product.
inline float apply_sign(float v, uint32_t sgn, int e) { return (sgn & kmask_iq2xs[e]) ? -v : v; }

// IQ2_XS / IQ2_S: the sub-block's 4-bit scale, low nibble for groups 0-1, high for 2-3.
inline float db_iq2(float d, uint8_t scale_byte, int g) {
  const int s4 = g < 2 ? (scale_byte & 15) : (scale_byte >> 4);
  return (d * (0.5f + static_cast<float>(s4))) * 0.25f;
}

}  // namespace

void dequant_iq2_xxs(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5, g = (j >> 3) & 3, e = j & 7;
    const uint32_t w1 = le32(b + 6 + 8 * sb);
    const float db = (d * (0.5f + static_cast<float>(w1 >> 28))) * 0.25f;
    const uint32_t sgn = ksigns_iq2xs[(w1 >> (7 * g)) & 127];
    y[j] = apply_sign(db * grid8(iq2xxs_grid, b[2 + 8 * sb + g], e), sgn, e);
  }
}

void dequant_iq2_xs(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5, g = (j >> 3) & 3, e = j & 7;
    const uint16_t v = le16(b + 2 + 2 * (4 * sb + g));
    const uint32_t sgn = ksigns_iq2xs[v >> 9];
    const float db = db_iq2(d, b[66 + sb], g);
    y[j] = apply_sign(db * grid8(iq2xs_grid, v & 511u, e), sgn, e);
  }
}

void dequant_iq2_s(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5, g = (j >> 3) & 3, e = j & 7;
    const uint32_t idx = b[2 + 4 * sb + g] | (((b[66 + sb] >> (2 * g)) & 3u) << 8);
    const uint32_t sgn = b[34 + 4 * sb + g];  // 8 explicit sign bits, no ksigns lookup
    const float db = db_iq2(d, b[74 + sb], g);
    y[j] = apply_sign(db * grid8(iq2s_grid, idx, e), sgn, e);
  }
}

void dequant_iq3_xxs(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5, g = (j >> 3) & 3, e = j & 7;
    const uint32_t w = le32(b + 66 + 4 * sb);
    const float db = (d * (0.5f + static_cast<float>(w >> 28))) * 0.5f;
    const uint32_t sgn = ksigns_iq2xs[(w >> (7 * g)) & 127];
    const uint32_t idx = b[2 + 8 * sb + 2 * g + (e >> 2)];  // two 4-value entries per group
    y[j] = apply_sign(db * grid4(iq3xxs_grid, idx, e & 3), sgn, e);
  }
}

void dequant_iq3_s(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5, g = (j >> 3) & 3, e = j & 7;
    const int t = 2 * g + (e >> 2);  // one of 8 half-groups of 4
    const uint32_t idx = b[2 + 8 * sb + t] | (((b[66 + sb] >> t) & 1u) << 8);
    const uint32_t sgn = b[74 + 4 * sb + g];
    const uint8_t sc = b[106 + (sb >> 1)];
    const int s4 = (sb & 1) ? (sc >> 4) : (sc & 15);
    const float db = d * static_cast<float>(1 + 2 * s4);
    y[j] = apply_sign(db * grid4(iq3s_grid, idx, e & 3), sgn, e);
  }
}

void dequant_iq1_s(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5, g = (j >> 3) & 3, e = j & 7;
    const uint16_t h = le16(b + 34 + 2 * sb);
    const uint32_t idx = b[2 + 4 * sb + g] | (((h >> (3 * g)) & 7u) << 8);
    const float dl = d * static_cast<float>(2 * ((h >> 12) & 7) + 1);
    const float delta = (h & 0x8000u) ? -0.125f : 0.125f;
    y[j] = dl * (grid8_signed(idx, e) + delta);
  }
}

void dequant_iq1_m(const uint8_t* b, float* y) {
  uint16_t W[4];
  for (int i = 0; i < 4; ++i) W[i] = le16(b + 48 + 2 * i);
  // No d field: the top nibbles of W0..W3 are bits 0-3, 4-7, 8-11 and 12-15 of an f16.
  const uint16_t dbits = static_cast<uint16_t>((W[0] >> 12) | ((W[1] >> 8) & 0x00F0u) |
                                               ((W[2] >> 4) & 0x0F00u) | (W[3] & 0xF000u));
  const float d = fp16_to_fp32(dbits);
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5, g = (j >> 3) & 3, e = j & 7;
    const uint8_t qh = b[32 + 2 * sb + (g >> 1)];
    const int hn = (g & 1) ? (qh >> 4) : (qh & 15);
    const uint32_t idx = b[4 * sb + g] | (static_cast<uint32_t>(hn & 7) << 8);
    const float delta = (hn & 8) ? -0.125f : 0.125f;
    const int s3 = (W[sb >> 1] >> (6 * (sb & 1) + 3 * (g >> 1))) & 7;  // groups 0-1 / 2-3 differ
    const float dl = d * static_cast<float>(2 * s3 + 1);
    y[j] = dl * (grid8_signed(idx, e) + delta);
  }
}

void dequant_iq4_nl(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 32; ++j) {
    const int code = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
    y[j] = d * static_cast<float>(kvalues_iq4nl[code]);
  }
}

void dequant_iq4_xs(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const uint16_t scales_h = le16(b + 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5, k = j & 31;
    const int ls = ((scales_l[sb >> 1] >> (4 * (sb & 1))) & 15) | (((scales_h >> (2 * sb)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    const int code = k < 16 ? (qs[16 * sb + k] & 15) : (qs[16 * sb + k - 16] >> 4);
    y[j] = dl * static_cast<float>(kvalues_iq4nl[code]);
  }
}

}  // namespace strata::quant::detail
