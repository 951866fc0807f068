// The public contracts of dequantize_row / quantize_row beyond the vectors: which types are
// supported, the error messages (they must name the type), plain types and edge cases.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"
#include "strata/quant/scalar.h"
#include "vector_file.h"

namespace strata::quant {
namespace {

TEST(Dequant, SupportedTypes) {
  for (Type t : testing::dequant_vector_types()) EXPECT_TRUE(has_dequantizer(t)) << testing::vector_stem(t);
  for (Type t : {Type::F32, Type::F16, Type::BF16, Type::Q8_1}) EXPECT_TRUE(has_dequantizer(t));
  for (Type t : {Type::I8, Type::I16, Type::I32, Type::I64, Type::F64}) EXPECT_FALSE(has_dequantizer(t));
  EXPECT_FALSE(has_dequantizer(static_cast<Type>(4)));   // removed Q4_2
  EXPECT_FALSE(has_dequantizer(static_cast<Type>(31)));  // removed Q4_0_4_4
  EXPECT_FALSE(has_dequantizer(static_cast<Type>(99)));  // unknown
}

TEST(Dequant, ErrorsNameTheType) {
  uint8_t buf[512] = {};
  float out[512];
  Status s = dequantize_row(Type::Q4_K, buf, out, 300);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("q4_K"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("256"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("300"), std::string::npos) << s.message();
  s = dequantize_row(Type::Q8_0, buf, out, -32);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("q8_0"), std::string::npos) << s.message();
  s = dequantize_row(Type::I32, buf, out, 4);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("i32"), std::string::npos) << s.message();
  s = dequantize_row(static_cast<Type>(77), buf, out, 4);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("77"), std::string::npos) << s.message();
  EXPECT_TRUE(dequantize_row(Type::Q4_K, buf, out, 0).ok());  // an empty row is fine
}

TEST(Dequant, PlainTypes) {
  const float f32[3] = {1.5f, -0.0f, std::ldexp(1.0f, -140)};
  float out[3];
  ASSERT_TRUE(dequantize_row(Type::F32, f32, out, 3).ok());
  EXPECT_EQ(0, std::memcmp(f32, out, sizeof f32));

  const uint8_t f16[6] = {0x00, 0x3C, 0x01, 0x80, 0xFF, 0x7B};  // 1.0, -2^-24, 65504 (LE)
  ASSERT_TRUE(dequantize_row(Type::F16, f16, out, 3).ok());
  EXPECT_EQ(std::bit_cast<uint32_t>(out[0]), std::bit_cast<uint32_t>(1.0f));
  EXPECT_EQ(std::bit_cast<uint32_t>(out[1]), std::bit_cast<uint32_t>(-std::ldexp(1.0f, -24)));
  EXPECT_EQ(out[2], 65504.0f);

  const uint8_t bf16[4] = {0xC0, 0x3F, 0x00, 0x80};  // 1.5, -0.0
  ASSERT_TRUE(dequantize_row(Type::BF16, bf16, out, 2).ok());
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(std::bit_cast<uint32_t>(out[1]), 0x80000000u);
}

// Q8_1 has no ggml dequantizer and no vectors: its value is qs * d, s does not enter.
TEST(Dequant, Q8_1IsQsTimesD) {
  uint8_t b[36];
  const uint16_t d = fp32_to_fp16(0.25f);
  b[0] = d & 0xFF, b[1] = d >> 8, b[2] = 0x12, b[3] = 0x34;
  for (int j = 0; j < 32; ++j) b[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  float out[32];
  ASSERT_TRUE(dequantize_row(Type::Q8_1, b, out, 32).ok());
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], static_cast<float>(j * 8 - 128) * 0.25f) << j;
}

TEST(Quantize, ErrorsNameTheType) {
  float x[64] = {};
  uint8_t out[512];
  Status s = quantize_row(Type::Q4_0, x, out, 32);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("q4_0"), std::string::npos) << s.message();
  s = quantize_row(Type::Q8_K, x, out, 64);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("q8_K"), std::string::npos) << s.message();
}

TEST(Quantize, AllZeroBlocks) {
  std::vector<float> x(256, 0.0f);
  std::vector<uint8_t> out(292, 0xEE);
  quantize_row_q8_K(x.data(), out.data(), 256);
  for (size_t k = 0; k < out.size(); ++k) EXPECT_EQ(out[k], 0) << "q8_K byte " << k;  // d, q and bsums
  out.assign(34, 0xEE);
  quantize_row_q8_0(x.data(), out.data(), 32);
  for (size_t k = 0; k < out.size(); ++k) EXPECT_EQ(out[k], 0) << "q8_0 byte " << k;
  out.assign(36, 0xEE);
  quantize_row_q8_1(x.data(), out.data(), 32);
  for (size_t k = 0; k < out.size(); ++k) EXPECT_EQ(out[k], 0) << "q8_1 byte " << k;
}

// Quantize then dequantize: every element within half a step (plus the f16 rounding of d).
TEST(Quantize, RoundTripWithinHalfStep) {
  std::vector<float> x(512);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f) * (1.0f + static_cast<float>(i % 7));
  for (Type t : {Type::Q8_0, Type::Q8_1, Type::Q8_K}) {
    const TypeInfo info = *type_info(t);
    std::vector<uint8_t> q(x.size() / info.block_size * info.type_size);
    std::vector<float> y(x.size());
    ASSERT_TRUE(quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size())).ok());
    ASSERT_TRUE(dequantize_row(t, q.data(), y.data(), static_cast<int64_t>(x.size())).ok());
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t b0 = i / info.block_size * info.block_size;
      float amax = 0.0f;
      for (size_t k = b0; k < b0 + info.block_size; ++k) amax = std::fmax(amax, std::fabs(x[k]));
      EXPECT_LE(std::fabs(y[i] - x[i]), amax / 127.0f * 0.5f + amax * 1e-3f) << testing::vector_stem(t) << " element " << i;
    }
  }
}

}  // namespace
}  // namespace strata::quant
