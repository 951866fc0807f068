// K-quants: super-blocks of 256 elements with packed sub-block scales (spec/quant-formats.md §4.5).
#include "dequant_blocks.h"

namespace strata::quant::detail {
namespace {

// The 2-bit code layout shared by Q2_K and Q3_K's low bits (and TQ2_0): each 128-element half
// uses 32 bytes, and element j sits in bit pair (j >> 5) & 3 of byte (j & 31) of its half.
inline int code2(const uint8_t* qs, int j) {
  return (qs[32 * (j >> 7) + (j & 31)] >> (2 * ((j >> 5) & 3))) & 3;
}

// Q4_K/Q5_K: eight 6-bit (scale, min) pairs packed into 12 bytes S. Pairs 0-3 use the low six
// bits of S[0..7]; pairs 4-7 take their low nibbles from S[8..11] and their top two bits from
// the spare high bits of S[0..7].
inline void scale_min_k4(const uint8_t* S, int b, int* sc, int* m) {
  if (b < 4) {
    *sc = S[b] & 63;
    *m = S[b + 4] & 63;
  } else {
    *sc = (S[b + 4] & 15) | ((S[b - 4] >> 6) << 4);
    *m = (S[b + 4] >> 4) | ((S[b] >> 6) << 4);
  }
}

}  // namespace

void dequant_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = f16_at(b + 80);
  const float dmin = f16_at(b + 82);
  for (int j = 0; j < 256; ++j) {
    const int sc = scales[j >> 4];
    const float dl = d * static_cast<float>(sc & 15);
    const float ml = dmin * static_cast<float>(sc >> 4);
    y[j] = (dl * static_cast<float>(code2(qs, j))) - ml;
  }
}

void dequant_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* scales = b + 96;
  const float d = f16_at(b + 108);
  int S[16];
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (scales[i] & 15) : (scales[i - 8] >> 4);
    const int high = (scales[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    S[i] = (low | (high << 4)) - 32;
  }
  for (int j = 0; j < 256; ++j) {
    const int h = (hmask[j & 31] >> (j >> 5)) & 1;
    const int q = code2(qs, j) - (h ? 0 : 4);  // a set high bit means "no -4"
    y[j] = (d * static_cast<float>(S[j >> 4])) * static_cast<float>(q);
  }
}

void dequant_q4_k(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const float dmin = f16_at(b + 2);
  const uint8_t* S = b + 4;
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5;
    int sc = 0, m = 0;
    scale_min_k4(S, sb, &sc, &m);
    const uint8_t byte = qs[32 * (j >> 6) + (j & 31)];
    const int q = (sb & 1) ? (byte >> 4) : (byte & 15);
    y[j] = ((d * static_cast<float>(sc)) * static_cast<float>(q)) - (dmin * static_cast<float>(m));
  }
}

void dequant_q5_k(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const float dmin = f16_at(b + 2);
  const uint8_t* S = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int j = 0; j < 256; ++j) {
    const int sb = j >> 5;
    int sc = 0, m = 0;
    scale_min_k4(S, sb, &sc, &m);
    const uint8_t byte = qs[32 * (j >> 6) + (j & 31)];
    const int nibble = (sb & 1) ? (byte >> 4) : (byte & 15);
    const int q = nibble + 16 * ((qh[j & 31] >> sb) & 1);
    y[j] = ((d * static_cast<float>(sc)) * static_cast<float>(q)) - (dmin * static_cast<float>(m));
  }
}

void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const uint8_t* scales = b + 192;  // int8
  const float d = f16_at(b + 208);
  for (int j = 0; j < 256; ++j) {
    const int n = j >> 7, k = (j >> 5) & 3, l = j & 31;
    const uint8_t byte = ql[64 * n + 32 * (k & 1) + l];
    const int nibble = k < 2 ? (byte & 15) : (byte >> 4);
    const int hi = (qh[32 * n + l] >> (2 * k)) & 3;
    const int q = (nibble | (hi << 4)) - 32;
    const float sc = static_cast<float>(static_cast<int8_t>(scales[j >> 4]));
    y[j] = (d * sc) * static_cast<float>(q);
  }
}

// Q8_K's d is a full binary32 (not f16), so this is the one product here that can round.
void dequant_q8_k(const uint8_t* b, float* y) {
  const float d = std::bit_cast<float>(le32(b));
  for (int j = 0; j < 256; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(b[4 + j]));
}

}  // namespace strata::quant::detail
