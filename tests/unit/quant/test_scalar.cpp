// fp16 / bf16 conversions against independent arithmetic: decoded values are built with ldexp
// from the IEEE field definitions, and the rounding references pick the nearest representable
// value by comparing exact double distances, never by calling the functions under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "strata/quant/scalar.h"

namespace strata::quant {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// IEEE binary16 by definition: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m for e = 0.
double f16_value(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp(m, -24) : (e == 31 ? INFINITY : std::ldexp(1024 + m, e - 25));
  return s ? -v : v;
}

// bfloat16 by definition: 8 exponent bits (bias 127), 7 mantissa bits.
double bf16_value(uint16_t h) {
  const int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
  double v = e == 0 ? std::ldexp(m, -133) : (e == 255 ? INFINITY : std::ldexp(128 + m, e - 134));
  return s ? -v : v;
}

// Nearest f16 of a finite float, ties to the even bit pattern; overflow threshold 65520.
uint16_t ref_to_f16(float x) {
  const double a = std::fabs(static_cast<double>(x));
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (a >= 65520.0) return sign | 0x7C00;
  // Positive finite halves increase with their bit pattern: binary search the last one <= a.
  static const std::vector<double> kValues = [] {
    std::vector<double> v(0x7C00);
    for (uint16_t h = 0; h < 0x7C00; ++h) v[h] = f16_value(h);
    return v;
  }();
  const uint16_t lo = static_cast<uint16_t>(std::upper_bound(kValues.begin(), kValues.end(), a) - kValues.begin() - 1);
  const double dlo = a - f16_value(lo), dhi = (lo == 0x7BFF ? 65536.0 : f16_value(lo + 1)) - a;
  const uint16_t r = (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) ? lo : static_cast<uint16_t>(lo + 1);
  return sign | r;
}

// Nearest bf16 of a finite float: the candidates are the truncation and the next pattern up;
// the pattern after the largest finite value stands for 2^128 (IEEE's overflow threshold).
uint16_t ref_to_bf16(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  const uint16_t lo = static_cast<uint16_t>((bits(x) & 0x7FFFFFFFu) >> 16);
  const double vlo = bf16_value(lo), vhi = lo == 0x7F7F ? std::ldexp(1.0, 128) : bf16_value(lo + 1);
  const double dlo = a - vlo, dhi = vhi - a;
  const uint16_t r = (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) ? lo : static_cast<uint16_t>(lo + 1);
  return sign | r;
}

TEST(Fp16, WidenEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = fp16_to_fp32(static_cast<uint16_t>(h));
    const bool is_nan = ((h >> 10) & 31) == 31 && (h & 1023) != 0;
    if (is_nan) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
      EXPECT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
      EXPECT_EQ(bits(got) & 0x007FE000u, (h & 1023u) << 13) << "payload of " << std::hex << h;
    } else {
      EXPECT_EQ(bits(got), bits(static_cast<float>(f16_value(static_cast<uint16_t>(h))))) << std::hex << h;
    }
  }
}

std::vector<float> f16_rounding_inputs() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e10f,
                          from_bits(0x7F7FFFFF), std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                          std::nextafter(std::ldexp(1.0f, -25), 1.0f), std::ldexp(1.0f, -26),
                          std::ldexp(1.5f, -25), std::ldexp(1.0f, -14), std::ldexp(1023.5f, -24),
                          std::ldexp(1.0f, -149), -std::ldexp(3.0f, -26)};
  // Every midpoint between neighbouring halves (the ties), and one float ulp either side.
  for (uint16_t h = 0; h < 0x7BFF; h += 7) {
    const float mid = static_cast<float>((f16_value(h) + f16_value(h + 1)) / 2);  // exact in binary32
    v.insert(v.end(), {mid, -mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)});
  }
  uint64_t s = 12345;  // xorshift for random bit patterns, all exponents
  for (int i = 0; i < 200000; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    const float f = from_bits(static_cast<uint32_t>(s));
    if (std::isfinite(f)) v.push_back(f);
    // Also random values inside the half range and a little below it, where rounding is busy.
    const int e = static_cast<int>((s >> 40) % 45) - 27;
    const float g = std::ldexp(1.0f + static_cast<float>(s & 0xFFFFFF) * 0x1p-24f, e);
    v.push_back((s >> 63) ? -g : g);
  }
  return v;
}

TEST(Fp16, NarrowRoundsToNearestEven) {
  int failures = 0;
  for (float x : f16_rounding_inputs()) {
    const uint16_t want = ref_to_f16(x), got = fp32_to_fp16(x);
    if (want != got && ++failures <= 10) {
      ADD_FAILURE() << "fp32_to_fp16(" << std::hexfloat << x << "): expected 0x" << std::hex << want << ", got 0x" << got;
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(Fp16, NarrowSpecialValues) {
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(std::nanf("")), 0x7E00);
  EXPECT_EQ(fp32_to_fp16(from_bits(0xFF800001u)), 0xFE00);  // NaN: sign kept, payload dropped
  EXPECT_EQ(fp32_to_fp16(from_bits(0x7FC12345u)), 0x7E00);
  EXPECT_EQ(fp32_to_fp16(1.0009765625f), 0x3C01);  // 1 + 2^-10
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie, even is down
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie, even is up
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);         // tie between 0 and 2^-24
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);         // tie between 1 and 2 (x 2^-24)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(2047.0f, -25)), 0x0400);      // rounds up into the normals
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7BFF);
}

TEST(Fp16, RoundTripEveryFiniteHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if (((h >> 10) & 31) == 31) continue;
    EXPECT_EQ(fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Bf16, WidenEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = bf16_to_fp32(static_cast<uint16_t>(h));
    if (((h >> 7) & 255) == 255 && (h & 127) != 0) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
      EXPECT_EQ(bits(got), h << 16) << std::hex << h;
    } else {
      EXPECT_EQ(bits(got), bits(static_cast<float>(bf16_value(static_cast<uint16_t>(h))))) << std::hex << h;
    }
  }
}

TEST(Bf16, NarrowRoundsToNearestEven) {
  std::vector<float> inputs = {0.0f, -0.0f, 1.0f, from_bits(0x3F808000u), from_bits(0x3F818000u),
                               from_bits(0x3F808001u), from_bits(0x7F7FFFFFu), from_bits(0x7F7F8000u),
                               from_bits(0x7F7F7FFFu), from_bits(0x00000001u), from_bits(0x00008000u),
                               from_bits(0x00018000u), from_bits(0x807FFFFFu)};
  uint64_t s = 99;
  for (int i = 0; i < 200000; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    inputs.push_back(from_bits(static_cast<uint32_t>(s)));
  }
  int failures = 0;
  for (float x : inputs) {
    if (!std::isfinite(x)) continue;
    const uint16_t want = ref_to_bf16(x), got = fp32_to_bf16(x);
    if (want != got && ++failures <= 10) {
      ADD_FAILURE() << "fp32_to_bf16(" << std::hexfloat << x << "): expected 0x" << std::hex << want << ", got 0x" << got;
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(Bf16, NarrowSpecialValues) {
  EXPECT_EQ(fp32_to_bf16(INFINITY), 0x7F80);
  EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xFF80);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7F7FFFFFu)), 0x7F80);  // overflows to inf by rounding
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3F808000u)), 0x3F80);  // tie, even is down
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3F818000u)), 0x3F82);  // tie, even is up
  // NaN: top bits kept, bit 6 set so a payload only in the dropped half still reads as NaN.
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(fp32_to_bf16(from_bits(0xFF810000u)), 0xFFC1);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7FC00000u)), 0x7FC0);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(from_bits(0x7F800001u)))));
}

}  // namespace
}  // namespace strata::quant
