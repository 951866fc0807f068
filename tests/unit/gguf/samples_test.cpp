// The two sample files from the reference writer: our reader must see exactly what the
// reference reader saw, as recorded in the canonical dumps next to them.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "strata/gguf/gguf.h"

namespace strata::gguf {
namespace {

std::string sample(const std::string& name) { return std::string(STRATA_TEST_DATA) + "/gguf-samples/" + name; }

// The expected dump without its leading '#' comment lines.
std::string expected_dump(const std::string& name) {
  std::ifstream in(sample(name));
  std::string line, out;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '#') continue;
    out += line + "\n";
  }
  return out;
}

class SampleTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SampleTest, DumpMatchesReference) {
  std::string base = GetParam();
  auto file = File::open(sample(base + ".gguf"));
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(dump_canonical(*file), expected_dump(base + ".expected.txt"));
}

TEST_P(SampleTest, OpensAsModelWithZeroCopyViews) {
  std::string base = GetParam();
  auto model = Model::open(sample(base + ".gguf"));
  ASSERT_TRUE(model.ok()) << model.error();
  ASSERT_EQ(model->shards().size(), 1u);
  ASSERT_EQ(model->tensors().size(), 4u);
  const File& f = model->shards()[0];
  for (const TensorInfo& t : model->tensors()) {
    EXPECT_EQ(t.data, f.data() + f.data_offset() + t.offset) << t.name;
    EXPECT_EQ(t.file_offset, f.data_offset() + t.offset);
    EXPECT_EQ(t.shard, 0u);
  }
  auto q = model->tensor("blk.0.attn_q.weight");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)->type, quant::Type::Q8_0);
  EXPECT_EQ((*q)->row_bytes(), 68u);
  EXPECT_EQ((*q)->n_rows(), 2u);
  auto missing = model->tensor("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("tensor nope: missing in"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Samples, SampleTest, ::testing::Values("tiny-align32", "tiny-align64"));

TEST(Samples, TypedGetters) {
  auto file = File::open(sample("tiny-align32.gguf"));
  ASSERT_TRUE(file.ok()) << file.error();
  const Metadata& md = file->metadata();
  EXPECT_EQ(*md.get_string("general.architecture"), "llama");
  EXPECT_EQ(*md.get_u32("general.quantization_version"), 2u);
  EXPECT_EQ(*md.get_u8("test.u8"), 200);
  EXPECT_EQ(*md.get_i8("test.i8"), -100);
  EXPECT_EQ(*md.get_u16("test.u16"), 60000);
  EXPECT_EQ(*md.get_i16("test.i16"), -30000);
  EXPECT_EQ(*md.get_i32("test.i32"), -2000000000);
  EXPECT_EQ(*md.get_u64("test.u64"), 18000000000000000000ull);
  EXPECT_EQ(*md.get_i64("test.i64"), -9000000000000000000ll);
  EXPECT_EQ(*md.get_bool("test.bool"), true);
  EXPECT_DOUBLE_EQ(*md.get_f64("test.f64"), 3.141592653589793);
  EXPECT_EQ(*md.get_uint("general.quantization_version"), 2u);
  EXPECT_EQ((*md.get_array<int32_t>("test.arr_i32")), (std::vector<int32_t>{1, -2, 3, -4, 5}));
  EXPECT_EQ((*md.get_int_array("test.arr_i32")), (std::vector<int64_t>{1, -2, 3, -4, 5}));
  EXPECT_EQ((*md.get_f32_array("test.arr_f32")), (std::vector<float>{0.5f, -1.5f, 2.25f}));
  EXPECT_EQ((*md.get_string_array("tokenizer.ggml.tokens")).size(), 4u);
  EXPECT_TRUE((*md.get_u64_array("test.arr_empty_u64")).empty());

  auto wrong = md.get_u32("general.architecture");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().find("gguf: key general.architecture: expected u32, got string in "), std::string::npos)
      << wrong.error();
  EXPECT_NE(wrong.error().find("tiny-align32.gguf"), std::string::npos);
  auto missing = md.get_f32("qwen4exp.rope.freq_base");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("key qwen4exp.rope.freq_base: missing in"), std::string::npos);
  auto arr = md.get_array<uint32_t>("test.arr_i32");
  ASSERT_FALSE(arr.ok());
  EXPECT_NE(arr.error().find("expected array[u32], got array[i32]"), std::string::npos) << arr.error();
  auto negative = md.get_uint("test.i32");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().find("expected a value >= 0"), std::string::npos);
}

}  // namespace
}  // namespace strata::gguf
