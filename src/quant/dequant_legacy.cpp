// The 32-element legacy formats (spec/quant-formats.md §4.2) and Q1_0 / Q2_0 (§4.3).
#include "dequant_blocks.h"

namespace strata::quant::detail {
namespace {

// nib(j): the low nibble of qs[j] for j < 16, the high nibble of qs[j-16] for j >= 16; the two
// halves of a block share bytes.
inline int nib(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4); }

// Q5_0/Q5_1: the fifth bit of element j is bit j of qh.
inline int q5(const uint8_t* qs, uint32_t qh, int j) {
  return nib(qs, j) | static_cast<int>(((qh >> j) & 1u) << 4);
}

}  // namespace

void dequant_q4_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(nib(b + 2, j) - 8) * d;
}

void dequant_q4_1(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const float m = f16_at(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = (static_cast<float>(nib(b + 4, j)) * d) + m;
}

void dequant_q5_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const uint32_t qh = le32(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q5(b + 6, qh, j) - 16) * d;
}

void dequant_q5_1(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const float m = f16_at(b + 2);
  const uint32_t qh = le32(b + 4);
  for (int j = 0; j < 32; ++j) y[j] = (static_cast<float>(q5(b + 8, qh, j)) * d) + m;
}

void dequant_q8_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// Q8_1 is an activation format and ggml has no dequantizer for it; s (bytes 2..3) is only an
// auxiliary sum for dot products, so the value is qs[j] * d as for Q8_0.
void dequant_q8_1(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[4 + j])) * d;
}

void dequant_q1_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 128; ++j) {
    const int bit = (b[2 + (j >> 3)] >> (j & 7)) & 1;
    y[j] = bit ? d : -d;
  }
}

// Codes 0..3 mean -d, 0, +d, +2d; ggml's quantizer never writes 3 but a decoder must accept it.
void dequant_q2_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 64; ++j) {
    const int c = (b[2 + (j >> 2)] >> (2 * (j & 3))) & 3;
    y[j] = static_cast<float>(c - 1) * d;
  }
}

}  // namespace strata::quant::detail
