// Scalar reference quantizers for the activation formats Q8_0, Q8_1 and Q8_K
// (spec/quant-formats.md §5). Rounding differs on purpose: Q8_0/Q8_1 use roundf (ties away from
// zero), Q8_K uses magic-number rounding (ties to even), exactly as ggml's scalar references do,
// so CPU dot products against ggml-quantized activations match to the bit.
#include "strata/quant/quantize.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

#include "dequant_blocks.h"

namespace strata::quant {
namespace {

using detail::put_le16;

// Shared by Q8_0 and Q8_1: fills q[32] and returns the unrounded fp32 scale d.
float quantize_block_32(const float* x, int8_t* q) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    amax = amax > ax ? amax : ax;  // a NaN input propagates, as in ggml
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  return d;
}

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the rounded integer
// in the low mantissa bits (the rounding is the FPU's, which is to-nearest-even).
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007FFFFF) - 0x00400000;
}

void quantize_block_q8_k(const float* x, uint8_t* blk) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 256; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {  // strict: the first element of largest magnitude wins
      amax = ax;
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    std::memset(blk, 0, 292);
    return;
  }
  // Negative when max > 0: the largest-magnitude element always maps to -127, never to +128.
  const float iscale = -127.0f / max;
  int16_t sums[16] = {};
  for (int j = 0; j < 256; ++j) {
    int v = nearest_int(iscale * x[j]);
    if (v > 127) v = 127;
    blk[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(v));
    sums[j >> 4] = static_cast<int16_t>(sums[j >> 4] + v);
  }
  const float d = 1.0f / iscale;
  std::memcpy(blk, &d, 4);
  for (int i = 0; i < 16; ++i) put_le16(blk + 260 + 2 * i, static_cast<uint16_t>(sums[i]));
}

}  // namespace

void quantize_row_q8_0(const float* x, void* dst, int64_t n) {
  assert(n >= 0 && n % 32 == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32, out += 34) {
    const float d = quantize_block_32(x, reinterpret_cast<int8_t*>(out + 2));
    put_le16(out, fp32_to_fp16(d));
  }
}

void quantize_row_q8_1(const float* x, void* dst, int64_t n) {
  assert(n >= 0 && n % 32 == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32, out += 36) {
    int8_t q[32];
    const float d = quantize_block_32(x, q);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += q[j];
    std::memcpy(out + 4, q, 32);
    put_le16(out, fp32_to_fp16(d));
    put_le16(out + 2, fp32_to_fp16(static_cast<float>(sum) * d));  // the unrounded d, as ggml
  }
}

void quantize_row_q8_K(const float* x, void* dst, int64_t n) {
  assert(n >= 0 && n % 256 == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / 256; ++i) quantize_block_q8_k(x + 256 * i, out + 292 * i);
}

Status quantize_row(Type type, const float* x, void* dst, int64_t n) {
  void (*fn)(const float*, void*, int64_t) = nullptr;
  int64_t block = 0;
  switch (type) {
    case Type::Q8_0: fn = quantize_row_q8_0; block = 32; break;
    case Type::Q8_1: fn = quantize_row_q8_1; block = 32; break;
    case Type::Q8_K: fn = quantize_row_q8_K; block = 256; break;
    default: break;
  }
  auto info = type_info(type);
  const std::string name = info ? std::string(info->name) : "type id " + std::to_string(static_cast<uint32_t>(type));
  if (fn == nullptr) return Status::error("quant: quantize_row: no quantizer for " + name + " (only q8_0, q8_1, q8_K)");
  if (n < 0 || n % block != 0) {
    return Status::error("quant: quantize_row: " + name + ": row length " + std::to_string(n) +
                         " is not a non-negative multiple of the block size " + std::to_string(block));
  }
  fn(x, dst, n);
  return Status::ok_status();
}

}  // namespace strata::quant
