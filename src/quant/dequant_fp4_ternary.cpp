// Microscaling FP4 (MXFP4, NVFP4; spec/quant-formats.md §3, §4.4) and the ternary TQ1_0 / TQ2_0
// (§4.6). Both families decode small integer codes against one scale per (sub-)block.
#include "dequant_blocks.h"
#include "strata/quant/tables_data.h"

namespace strata::quant::detail {

// E8M0 "half" scale: exactly 2^(e-128). e = 0 and 1 are binary32 subnormals (bits 21 and 22 of
// the mantissa); the value is built from bits so that it never depends on FTZ or libm.
float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(bits);
}

// UE4M3 "half" scale: 0x00 and 0x7F decode to 0; bit 7 is ignored. Every step is exact.
float ue4m3_half(uint8_t x) {
  if (x == 0x00 || x == 0x7F) return 0.0f;
  const int E = (x >> 3) & 15;
  const int M = x & 7;
  float raw;
  if (E == 0) {
    raw = static_cast<float>(M) * 0x1p-9f;
  } else {
    // (1 + M/8) * 2^(E-7) = (8 + M) * 2^(E-10); a power of two is exact as a float.
    raw = static_cast<float>(8 + M) * std::bit_cast<float>(static_cast<uint32_t>(E - 10 + 127) << 23);
  }
  return raw * 0.5f;
}

void dequant_mxfp4(const uint8_t* b, float* y) {
  const float s = e8m0_half(b[0]);
  const uint8_t* qs = b + 1;
  for (int j = 0; j < 32; ++j) {
    const int code = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
    y[j] = static_cast<float>(kvalues_fp4[code]) * s;
  }
}

void dequant_nvfp4(const uint8_t* b, float* y) {
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 64; ++j) {
    const int s = j >> 4, k = j & 15;
    const int code = k < 8 ? (qs[8 * s + k] & 15) : (qs[8 * s + k - 8] >> 4);
    y[j] = static_cast<float>(kvalues_fp4[code]) * ue4m3_half(b[s]);
  }
}

namespace {

// Trit n (n = 0 most significant) of a byte that stores a base-3 number scaled by 256/243:
// multiplying by 3^n (mod 256) shifts trit n to the top, and (v * 3) >> 8 reads it.
inline int trit(uint8_t v, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t shifted = static_cast<uint8_t>(v * kPow3[n]);  // u8 wrap-around is the point
  return (shifted * 3) >> 8;
}

}  // namespace

void dequant_tq1_0(const uint8_t* b, float* y) {
  const uint8_t* qs = b;
  const uint8_t* qh = b + 48;
  const float d = f16_at(b + 52);
  for (int j = 0; j < 256; ++j) {
    int t;
    if (j < 160) {
      t = trit(qs[j % 32], j / 32);
    } else if (j < 240) {
      const int u = j - 160;
      t = trit(qs[32 + u % 16], u / 16);
    } else {
      const int u = j - 240;
      t = trit(qh[u % 4], u / 4);
    }
    y[j] = static_cast<float>(t - 1) * d;
  }
}

void dequant_tq2_0(const uint8_t* b, float* y) {
  const float d = f16_at(b + 64);
  for (int j = 0; j < 256; ++j) {
    const int c = (b[32 * (j >> 7) + (j & 31)] >> (2 * ((j >> 5) & 3))) & 3;
    y[j] = static_cast<float>(c - 1) * d;  // code 3 (+2d) is never written but decodes
  }
}

}  // namespace strata::quant::detail
