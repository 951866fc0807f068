// Bit-exact checks against the ggml reference outputs in tests/data/vectors: every block of
// every dequantization file, and every block of the three activation-quantizer files.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <cstring>

#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"
#include "vector_file.h"

namespace strata::quant {
namespace {

using testing::VectorFile;

std::string hexf(float v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (0x%08x)", static_cast<double>(v), std::bit_cast<uint32_t>(v));
  return buf;
}

std::string hexbytes(const uint8_t* p, size_t n) {
  std::string s;
  char buf[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    s += buf;
  }
  return s;
}

std::string param_name(const ::testing::TestParamInfo<Type>& info) { return testing::vector_stem(info.param); }

class DequantVectors : public ::testing::TestWithParam<Type> {};

TEST_P(DequantVectors, EveryBlockBitExact) {
  const Type t = GetParam();
  const TypeInfo info = *type_info(t);
  const std::string stem = testing::vector_stem(t);
  const VectorFile f = testing::read_vector_file(testing::vectors_dir() + "/" + stem + ".txt");
  ASSERT_EQ(f.error, "");
  ASSERT_EQ(f.records.size(), 4u) << f.path;
  for (size_t bi = 0; bi < f.records.size(); ++bi) {
    const auto& rec = f.records[bi];
    ASSERT_EQ(rec.block.size(), info.type_size) << stem << " block " << bi << ": block_hex size";
    ASSERT_EQ(rec.floats.size(), info.block_size) << stem << " block " << bi << ": values count";
    std::vector<float> got(info.block_size);
    ASSERT_TRUE(dequantize_row(t, rec.block.data(), got.data(), info.block_size).ok());
    int mismatches = 0;
    for (size_t j = 0; j < got.size() && mismatches < 10; ++j) {
      // Compare bit patterns: -0.0 vs 0.0 and any NaN payload difference must fail.
      const uint32_t want = std::bit_cast<uint32_t>(rec.floats[j]);
      const uint32_t have = std::bit_cast<uint32_t>(got[j]);
      if (want != have) {
        ++mismatches;
        ADD_FAILURE() << stem << " block " << bi << " element " << j << ": expected " << hexf(rec.floats[j])
                      << ", got " << hexf(got[j]);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantVectors, ::testing::ValuesIn(testing::dequant_vector_types()),
                         param_name);

class QuantizeVectors : public ::testing::TestWithParam<Type> {};

TEST_P(QuantizeVectors, EveryBlockBitExact) {
  const Type t = GetParam();
  const TypeInfo info = *type_info(t);
  const std::string stem = testing::vector_stem(t);
  const VectorFile f = testing::read_vector_file(testing::vectors_dir() + "/" + stem + ".quantize.txt");
  ASSERT_EQ(f.error, "");
  ASSERT_EQ(f.records.size(), 4u) << f.path;
  for (size_t bi = 0; bi < f.records.size(); ++bi) {
    const auto& rec = f.records[bi];
    ASSERT_EQ(rec.floats.size(), info.block_size) << stem << " block " << bi << ": input count";
    ASSERT_EQ(rec.block.size(), info.type_size) << stem << " block " << bi << ": block_hex size";
    // Pre-fill with a pattern so that a field the quantizer forgot to write shows up.
    std::vector<uint8_t> got(info.type_size, 0xA5);
    ASSERT_TRUE(quantize_row(t, rec.floats.data(), got.data(), info.block_size).ok());
    EXPECT_EQ(hexbytes(got.data(), got.size()), hexbytes(rec.block.data(), rec.block.size()))
        << stem << " block " << bi;
    for (size_t k = 0; k < got.size(); ++k) {
      if (got[k] != rec.block[k]) {
        ADD_FAILURE() << stem << " block " << bi << ": first differing byte " << k << ": expected "
                      << int(rec.block[k]) << ", got " << int(got[k]);
        break;
      }
    }
    // The direct entry points give the same bytes as the dispatching one.
    std::vector<uint8_t> direct(info.type_size, 0x5A);
    if (t == Type::Q8_0) quantize_row_q8_0(rec.floats.data(), direct.data(), info.block_size);
    if (t == Type::Q8_1) quantize_row_q8_1(rec.floats.data(), direct.data(), info.block_size);
    if (t == Type::Q8_K) quantize_row_q8_K(rec.floats.data(), direct.data(), info.block_size);
    EXPECT_EQ(direct, got) << stem << " block " << bi << ": direct entry point differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, QuantizeVectors, ::testing::ValuesIn(testing::quantize_vector_types()),
                         param_name);

// Whole rows: the four blocks of a file back to back dequantize to the four value lists in order,
// so block offsets inside dequantize_row are right (a one-block test cannot see them).
TEST(DequantVectorsRow, FourBlocksAsOneRow) {
  for (Type t : testing::dequant_vector_types()) {
    const TypeInfo info = *type_info(t);
    const VectorFile f = testing::read_vector_file(testing::vectors_dir() + "/" + testing::vector_stem(t) + ".txt");
    ASSERT_EQ(f.error, "");
    std::vector<uint8_t> row;
    std::vector<float> want;
    for (const auto& r : f.records) {
      row.insert(row.end(), r.block.begin(), r.block.end());
      want.insert(want.end(), r.floats.begin(), r.floats.end());
    }
    std::vector<float> got(want.size());
    ASSERT_TRUE(dequantize_row(t, row.data(), got.data(), static_cast<int64_t>(want.size())).ok());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
        << testing::vector_stem(t) << ": row of " << f.records.size() << " blocks of " << info.block_size;
  }
}

}  // namespace
}  // namespace strata::quant
