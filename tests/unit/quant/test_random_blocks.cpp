// fill_random_blocks: valid, finite, of the requested magnitude, deterministic, for every type
// that has a dequantizer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"
#include "strata/quant/scalar.h"

namespace strata::quant {
namespace {

std::vector<Type> dequantizable_types() {
  std::vector<Type> v;
  for (uint32_t id = 0; id < kTypeCount; ++id) {
    if (has_dequantizer(static_cast<Type>(id))) v.push_back(static_cast<Type>(id));
  }
  return v;
}

std::string name(Type t) { return std::string(type_info(t)->name); }

std::vector<uint8_t> fill(Type t, uint64_t seed, int64_t n_blocks, float scale) {
  std::vector<uint8_t> buf(static_cast<size_t>(n_blocks) * type_info(t)->type_size);
  const Status s = fill_random_blocks(t, seed, buf.data(), n_blocks, scale);
  EXPECT_TRUE(s.ok()) << name(t) << ": " << s.message();
  return buf;
}

TEST(RandomBlocks, CoversTheExpectedTypes) { EXPECT_EQ(dequantizable_types().size(), 30u); }

TEST(RandomBlocks, FiniteAndOfTheRequestedMagnitude) {
  constexpr int64_t kBlocks = 48;
  for (Type t : dequantizable_types()) {
    const TypeInfo info = *type_info(t);
    for (float scale : {0.02f, 1.0f, 40.0f}) {
      const std::vector<uint8_t> buf = fill(t, 7, kBlocks, scale);
      std::vector<float> y(kBlocks * info.block_size);
      ASSERT_TRUE(dequantize_row(t, buf.data(), y.data(), static_cast<int64_t>(y.size())).ok());
      float row_amax = 0.0f;
      for (int64_t b = 0; b < kBlocks; ++b) {
        float amax = 0.0f;
        for (uint32_t j = 0; j < info.block_size; ++j) {
          const float v = y[b * info.block_size + j];
          ASSERT_TRUE(std::isfinite(v)) << name(t) << " scale " << scale << " block " << b << " element " << j;
          amax = std::fmax(amax, std::fabs(v));
        }
        // Quantized blocks are scaled to a largest |value| in [scale/2, scale] up to the rounding
        // of the scale field; plain types hold one uniform value, so only the bound applies.
        ASSERT_LE(amax, scale * 1.05f) << name(t) << " scale " << scale << " block " << b;
        if (info.quantized) {
          ASSERT_GE(amax, scale / 8) << name(t) << " scale " << scale << " block " << b;
        }
        row_amax = std::fmax(row_amax, amax);
      }
      EXPECT_GE(row_amax, scale / 2) << name(t) << " scale " << scale;
    }
  }
}

TEST(RandomBlocks, Deterministic) {
  for (Type t : dequantizable_types()) {
    const std::vector<uint8_t> a = fill(t, 42, 8, 0.5f), b = fill(t, 42, 8, 0.5f);
    const std::vector<uint8_t> c = fill(t, 43, 8, 0.5f), longer = fill(t, 42, 16, 0.5f);
    EXPECT_EQ(a, b) << name(t);
    EXPECT_NE(a, c) << name(t) << ": seed has no effect";
    EXPECT_EQ(0, std::memcmp(a.data(), longer.data(), a.size())) << name(t) << ": prefix changes with n_blocks";
  }
}

// Derived fields agree with the codes, and codes stay within what ggml's quantizers write.
TEST(RandomBlocks, DerivedFieldsAndCodeRanges) {
  const std::vector<uint8_t> q8k = fill(Type::Q8_K, 1, 16, 1.0f);
  for (int b = 0; b < 16; ++b) {
    const uint8_t* blk = q8k.data() + 292 * b;
    for (int i = 0; i < 16; ++i) {
      int sum = 0;
      for (int k = 0; k < 16; ++k) sum += static_cast<int8_t>(blk[4 + 16 * i + k]);
      EXPECT_EQ(static_cast<int16_t>(blk[260 + 2 * i] | (blk[261 + 2 * i] << 8)), sum) << "q8_K block " << b << " bsum " << i;
    }
    for (int k = 0; k < 256; ++k) EXPECT_NE(blk[4 + k], 0x80) << "q8_K never holds -128";
  }
  const std::vector<uint8_t> q81 = fill(Type::Q8_1, 1, 16, 1.0f);
  for (int b = 0; b < 16; ++b) {
    const uint8_t* blk = q81.data() + 36 * b;
    int sum = 0;
    for (int k = 0; k < 32; ++k) sum += static_cast<int8_t>(blk[4 + k]);
    const float d = fp16_to_fp32(static_cast<uint16_t>(blk[0] | (blk[1] << 8)));
    EXPECT_EQ(blk[2] | (blk[3] << 8), fp32_to_fp16(static_cast<float>(sum) * d)) << "q8_1 block " << b << " s";
  }
  const std::vector<uint8_t> tq2 = fill(Type::TQ2_0, 1, 16, 1.0f);
  for (int b = 0; b < 16; ++b) {
    for (int i = 0; i < 64; ++i) {
      for (int k = 0; k < 4; ++k) EXPECT_NE((tq2[66 * b + i] >> (2 * k)) & 3, 3) << "tq2_0 block " << b;
    }
  }
  // TQ1_0 bytes are ceil(v * 256 / 243) for a base-3 number v (0..242); qh's v ends in a 0 trit.
  const std::vector<uint8_t> tq1 = fill(Type::TQ1_0, 1, 16, 1.0f);
  for (int b = 0; b < 16; ++b) {
    for (int i = 0; i < 52; ++i) {
      bool found = false;
      for (int v = 0; v < 243 && !found; v += (i >= 48 ? 3 : 1)) found = (v * 256 + 242) / 243 == tq1[54 * b + i];
      EXPECT_TRUE(found) << "tq1_0 block " << b << " byte " << i << " = " << int(tq1[54 * b + i]);
    }
  }
}

TEST(RandomBlocks, Errors) {
  uint8_t buf[1024];
  Status s = fill_random_blocks(Type::I8, 1, buf, 1, 1.0f);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("i8"), std::string::npos) << s.message();
  EXPECT_FALSE(fill_random_blocks(Type::Q4_0, 1, buf, -1, 1.0f).ok());
  EXPECT_FALSE(fill_random_blocks(Type::Q4_0, 1, buf, 1, 0.0f).ok());
  EXPECT_FALSE(fill_random_blocks(Type::Q4_0, 1, buf, 1, NAN).ok());
  EXPECT_FALSE(fill_random_blocks(Type::Q4_0, 1, buf, 1, INFINITY).ok());
  s = fill_random_blocks(Type::F16, 1, buf, 8, 1e6f);  // beyond f16 range
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("f16"), std::string::npos) << s.message();
  EXPECT_TRUE(fill_random_blocks(Type::Q4_0, 1, buf, 0, 1.0f).ok());
}

}  // namespace
}  // namespace strata::quant
