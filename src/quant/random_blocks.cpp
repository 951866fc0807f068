// fill_random_blocks: random but valid blocks for synthetic weights and oracle tests.
// Codes are random; scale fields are then set so that each block's largest |value| is a random
// fraction (1/2 .. 1) of the caller's scale. For the f16-scaled types this uses the fact that a
// block's values are linear in its (d, min) fields: decode once with d = 1, then rescale.
#include <cmath>
#include <cstring>
#include <string>

#include "dequant_blocks.h"
#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"

namespace strata::quant {
namespace {

using detail::le16;
using detail::put_le16;

// splitmix64: tiny, with fixed outputs on every platform (std:: distributions are not).
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>((next() >> 32) * n >> 32); }
  float unit() { return static_cast<float>(next() >> 40) * 0x1p-24f; }  // [0, 1)
};

// Where a type keeps its f16 scale fields. min_ratio sets the second field relative to d so
// that values straddle zero: Q4_1/Q5_1 add m (so m = -mid-code * d), the K-quants subtract
// dmin * m_b (so dmin ~ mean code * d).
struct F16Scales {
  int d_off;
  int min_off;  // -1: no second field
  float min_ratio;
};

F16Scales f16_scales(Type t) {
  switch (t) {
    case Type::Q4_1: return {0, 2, -7.5f};
    case Type::Q5_1: return {0, 2, -15.5f};
    case Type::Q2_K: return {80, 82, 1.5f};
    case Type::Q4_K: return {0, 2, 7.5f};
    case Type::Q5_K: return {0, 2, 15.5f};
    case Type::Q3_K: return {108, -1, 0.0f};
    case Type::Q6_K: return {208, -1, 0.0f};
    case Type::TQ1_0: return {52, -1, 0.0f};
    case Type::TQ2_0: return {64, -1, 0.0f};
    // Q4_0, Q5_0, Q8_0, Q8_1, Q1_0, Q2_0, IQ2_*, IQ3_*, IQ1_S, IQ4_*: d first, no second field.
    // IQ1_M and Q8_K: put_d handles their own d.
    default: return {0, -1, 0.0f};
  }
}

// IQ1_M has no d field: its f16 is spread over the top nibbles of the four words at 48..55.
void put_iq1m_d(uint8_t* b, uint16_t h) {
  for (int i = 0; i < 4; ++i) {
    const uint16_t w = static_cast<uint16_t>((le16(b + 48 + 2 * i) & 0x0FFFu) | (((h >> (4 * i)) & 15u) << 12));
    put_le16(b + 48 + 2 * i, w);
  }
}

void put_d(Type t, uint8_t* b, const F16Scales& f, float d) {
  if (t == Type::IQ1_M) return put_iq1m_d(b, fp32_to_fp16(d));
  if (t == Type::Q8_K) return static_cast<void>(std::memcpy(b, &d, 4));
  put_le16(b + f.d_off, fp32_to_fp16(d));
  if (f.min_off >= 0) put_le16(b + f.min_off, fp32_to_fp16(f.min_ratio * d));
}

float block_amax(Type t, const uint8_t* b, int block_size) {
  float y[256];
  detail::block_dequantizer(t)(b, y);
  float amax = 0.0f;
  for (int j = 0; j < block_size; ++j) amax = std::fmax(amax, std::fabs(y[j]));
  return amax;
}

// Codes: random bytes, then the fix-ups that keep a block to what ggml's quantizers write.
void random_codes(Type t, Rng& rng, uint8_t* b, int type_size) {
  for (int i = 0; i < type_size; ++i) b[i] = static_cast<uint8_t>(rng.next() >> 56);
  if (t == Type::Q8_0 || t == Type::Q8_1 || t == Type::Q8_K) {
    const int off = t == Type::Q8_0 ? 2 : 4, count = t == Type::Q8_K ? 256 : 32;
    for (int j = 0; j < count; ++j) b[off + j] = static_cast<uint8_t>(static_cast<int>(rng.below(255)) - 127);
  } else if (t == Type::TQ2_0) {  // codes 0..2 only
    for (int i = 0; i < 64; ++i) {
      b[i] = 0;
      for (int k = 0; k < 4; ++k) b[i] = static_cast<uint8_t>(b[i] | (rng.below(3) << (2 * k)));
    }
  } else if (t == Type::TQ1_0) {  // 5 trits per byte, first most significant, stored *256/243
    for (int i = 0; i < 52; ++i) {
      uint32_t v = 0;
      for (int k = 0; k < 5; ++k) v = 3 * v + (i >= 48 && k == 4 ? 0 : rng.below(3));  // qh: trailing 0
      b[i] = static_cast<uint8_t>((v * 256 + 242) / 243);
    }
  }
}

// Derived fields that must agree with the codes and the final d.
void fix_derived(Type t, uint8_t* b) {
  if (t == Type::Q8_1) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(b[4 + j]);
    put_le16(b + 2, fp32_to_fp16(static_cast<float>(sum) * detail::f16_at(b)));
  } else if (t == Type::Q8_K) {
    for (int i = 0; i < 16; ++i) {
      int sum = 0;
      for (int k = 0; k < 16; ++k) sum += static_cast<int8_t>(b[4 + 16 * i + k]);
      put_le16(b + 260 + 2 * i, static_cast<uint16_t>(static_cast<int16_t>(sum)));
    }
  }
}

// MXFP4: one power-of-two scale; the largest e with amax * 2^(e-128) <= target.
void scale_mxfp4(uint8_t* b, float target) {
  b[0] = 128;
  const float amax = block_amax(Type::MXFP4, b, 32);
  if (amax == 0.0f) return;
  const int e = 128 + std::ilogb(target / amax);
  b[0] = static_cast<uint8_t>(e < 0 ? 0 : (e > 254 ? 254 : e));
}

// NVFP4: per sub-block of 16, the largest UE4M3 byte (0x01..0x7E; the scale grows with the byte)
// whose scale keeps the sub-block's largest |value| within target. Byte 0x38 decodes to 0.5, so
// decoding once with it gives each sub-block's largest |code value| times 0.5.
void scale_nvfp4(uint8_t* b, float target) {
  std::memset(b, 0x38, 4);
  float y[64];
  detail::dequant_nvfp4(b, y);
  for (int s = 0; s < 4; ++s) {
    float amax = 0.0f;
    for (int k = 0; k < 16; ++k) amax = std::fmax(amax, std::fabs(y[16 * s + k]) * 2.0f);
    if (amax == 0.0f) amax = 12.0f;  // all-zero codes: any scale will do
    uint8_t best = 0x01;
    for (int x = 0x01; x <= 0x7E; ++x) {
      if (detail::ue4m3_half(static_cast<uint8_t>(x)) * amax <= target) best = static_cast<uint8_t>(x);
    }
    b[s] = best;
  }
}

// F32/F16/BF16: one value uniform in (-scale, scale).
void random_plain(Type t, Rng& rng, uint8_t* b, float scale) {
  const float v = (2.0f * rng.unit() - 1.0f) * scale;
  if (t == Type::F32) std::memcpy(b, &v, 4);
  if (t == Type::F16) put_le16(b, fp32_to_fp16(v));
  if (t == Type::BF16) put_le16(b, fp32_to_bf16(v));
}

// One block of a quantized type: codes, then scales for a largest |value| of target.
void random_block(Type t, Rng& rng, uint8_t* b, const TypeInfo& info, float target) {
  random_codes(t, rng, b, static_cast<int>(info.type_size));
  if (t == Type::MXFP4) return scale_mxfp4(b, target);
  if (t == Type::NVFP4) return scale_nvfp4(b, target);
  const F16Scales f = f16_scales(t);
  put_d(t, b, f, 1.0f);
  fix_derived(t, b);
  const float amax = block_amax(t, b, static_cast<int>(info.block_size));
  put_d(t, b, f, amax > 0.0f ? target / amax : target);
  fix_derived(t, b);
}

bool all_finite(Type t, const uint8_t* b, int block_size) {
  float y[256];
  detail::block_dequantizer(t)(b, y);
  for (int j = 0; j < block_size; ++j) {
    if (!std::isfinite(y[j])) return false;
  }
  return true;
}

}  // namespace

Status fill_random_blocks(Type type, uint64_t seed, void* dst, int64_t n_blocks, float scale) {
  auto info = type_info(type);
  const std::string name = info ? std::string(info->name) : "type id " + std::to_string(static_cast<uint32_t>(type));
  if (!has_dequantizer(type)) return Status::error("quant: fill_random_blocks: no dequantizer for " + name);
  if (n_blocks < 0) return Status::error("quant: fill_random_blocks: " + name + ": negative block count " + std::to_string(n_blocks));
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    return Status::error("quant: fill_random_blocks: " + name + ": scale must be finite and > 0, got " + std::to_string(scale));
  }
  auto* out = static_cast<uint8_t*>(dst);
  const bool plain = !info->quantized;
  for (int64_t i = 0; i < n_blocks; ++i) {
    // One stream per block, so block i does not depend on n_blocks (a prefix stays stable).
    Rng rng{seed ^ (static_cast<uint64_t>(info->id) << 56) ^ (static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ull)};
    rng.next();
    uint8_t* b = out + i * info->type_size;
    if (plain) {
      random_plain(type, rng, b, scale);
    } else {
      random_block(type, rng, b, *info, scale * (0.5f + 0.5f * rng.unit()));
    }
    if (!all_finite(type, b, static_cast<int>(info->block_size))) {
      return Status::error("quant: fill_random_blocks: " + name + ": scale " + std::to_string(scale) +
                           " overflows the format's scale field (block " + std::to_string(i) + ")");
    }
  }
  return Status::ok_status();
}

}  // namespace strata::quant
