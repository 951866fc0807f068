// Writer round trips: what the Writer writes, the reader reads back identically (every value
// type, nested arrays, several tensor types and alignments, streamed and sparse data, split
// sets), and rewriting the reference samples reproduces them byte for byte.
#include <sys/stat.h>

#include <numeric>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gguf_test_util.h"
#include "strata/gguf/gguf.h"
#include "strata/gguf/writer.h"

namespace strata::gguf {
namespace {

using namespace strata::gguf::testing;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

void set_every_type(Metadata& md) {
  md.set("general.architecture", "roundtrip");
  md.set("t.u8", uint8_t{250});
  md.set("t.i8", int8_t{-128});
  md.set("t.u16", uint16_t{65535});
  md.set("t.i16", int16_t{-32768});
  md.set("t.u32", uint32_t{4000000000u});
  md.set("t.i32", int32_t{-2147483647});
  md.set("t.f32", 1.5e-7f);
  md.set("t.bool", false);
  md.set("t.string", std::string("h\xc3\xa9llo \x01\x7f\"\\"));
  md.set("t.empty", std::string());
  md.set("t.u64", uint64_t{18446744073709551615ull});
  md.set("t.i64", int64_t{-9223372036854775807ll});
  md.set("t.f64", -2.5e300);
  md.set("t.arr_u8", Value::array<uint8_t>({0, 1, 255}));
  md.set("t.arr_i8", Value::array<int8_t>({-1, 2}));
  md.set("t.arr_u16", Value::array<uint16_t>({7}));
  md.set("t.arr_i16", Value::array<int16_t>({-7, 8}));
  md.set("t.arr_u32", Value::array<uint32_t>({11, 10, 10, 0}));
  md.set("t.arr_i32", Value::array<int32_t>({-5}));
  md.set("t.arr_f32", Value::array<float>({0.25f, -0.0f}));
  md.set("t.arr_bool", Value::array<bool>({true, false, true}));
  md.set("t.arr_str", Value::array<std::string>({"a", "", "\xe2\x96\x81the"}));
  md.set("t.arr_u64", Value::array<uint64_t>({23703573157769ull, 20109073645365ull, 8052911324071ull}));
  md.set("t.arr_i64", Value::array<int64_t>({-1, 1}));
  md.set("t.arr_f64", Value::array<double>({1e-300}));
  md.set("t.arr_empty", Value::array<uint64_t>({}));
  // Nested: [[1, 2], [3]] and [[["x"]]].
  md.set("t.nested", Value::array(ValueType::Array, {Value::array<int32_t>({1, 2}), Value::array<int32_t>({3})}));
  md.set("t.nested3", Value::array(ValueType::Array,
                                   {Value::array(ValueType::Array, {Value::array<std::string>({"x"})})}));
}

struct TensorSpec {
  std::string name;
  quant::Type type;
  std::vector<int64_t> ne;
};

const std::vector<TensorSpec> kTensors = {
    {"token_embd.weight", quant::Type::F32, {8, 3}},
    {"blk.0.attn_q.weight", quant::Type::Q8_0, {64, 2}},
    {"blk.0.ffn_up.weight", quant::Type::Q4_K, {256, 2, 1, 3}},
    {"blk.0.ffn_down.weight", quant::Type::IQ4_NL, {96}},
    {"blk.0.indexer.q_proj.weight", quant::Type::BF16, {5, 7}},
    {"blk.0.x.weight", quant::Type::I32, {3}},
    {"blk.0.q6.weight", quant::Type::Q6_K, {512, 1}},
    {"blk.0.empty.weight", quant::Type::F16, {0, 4}},
};

uint64_t expected_nbytes(const TensorSpec& t) {
  auto info = *quant::type_info(t.type);
  uint64_t n = static_cast<uint64_t>(t.ne[0]) / info.block_size * info.type_size;
  for (size_t i = 1; i < t.ne.size(); ++i) n *= static_cast<uint64_t>(t.ne[i]);
  return n;
}

class AlignmentTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(AlignmentTest, EveryValueTypeAndTensorTypeRoundTrips) {
  ScratchDir dir;
  const uint32_t alignment = GetParam();
  Writer w(alignment);
  set_every_type(w.metadata());
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < kTensors.size(); ++i) {
    data.push_back(random_bytes(expected_nbytes(kTensors[i]), static_cast<uint32_t>(i)));
    ASSERT_TRUE(w.add_tensor(kTensors[i].name, kTensors[i].type, kTensors[i].ne, TensorData::borrow(data.back())).ok());
  }
  std::string path = dir.file("rt.gguf");
  Status s = w.write(path);
  ASSERT_TRUE(s.ok()) << s.message();

  auto file = File::open(path);
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), alignment);
  EXPECT_EQ(file->data_offset() % alignment, 0u);
  // Every written key comes back equal, in order; general.alignment is added when not 32.
  const auto& got = file->metadata().entries();
  const auto& want = w.metadata().entries();
  ASSERT_EQ(got.size(), want.size() + (alignment != 32 ? 1 : 0));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].key, want[i].key);
    EXPECT_TRUE(got[i].value == want[i].value) << want[i].key;
  }
  if (alignment != 32) {
    EXPECT_EQ(*file->metadata().get_u32("general.alignment"), alignment);
  }
  ASSERT_EQ(file->tensors().size(), kTensors.size());
  uint64_t running = 0;
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const TensorInfo& t = file->tensors()[i];
    EXPECT_EQ(t.name, kTensors[i].name);
    EXPECT_EQ(t.type, kTensors[i].type);
    EXPECT_EQ(t.n_dims, kTensors[i].ne.size());
    EXPECT_EQ(t.offset, running) << "strict layout: offsets are the running padded sum";
    running += (t.nbytes + alignment - 1) / alignment * alignment;
    ASSERT_EQ(t.nbytes, data[i].size());
    EXPECT_TRUE(std::equal(data[i].begin(), data[i].end(), t.data)) << t.name;
  }
  EXPECT_EQ(file->size(), file->data_offset() + running) << "padded after the last tensor too";
}

INSTANTIATE_TEST_SUITE_P(Alignments, AlignmentTest, ::testing::Values(32u, 64u, 8u, 16u, 256u, 4096u));

TEST(Writer, RewritesReferenceSamplesByteForByte) {
  ScratchDir dir;
  for (const char* name : {"tiny-align32.gguf", "tiny-align64.gguf"}) {
    auto src = File::open(sample_path(name));
    ASSERT_TRUE(src.ok()) << src.error();
    Writer w(src->alignment());
    for (const KeyValue& kv : src->metadata().entries()) w.metadata().set(kv.key, kv.value);
    for (const TensorInfo& t : src->tensors()) {
      std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
      ASSERT_TRUE(w.add_tensor(t.name, t.type, ne, TensorData::borrow(t.bytes())).ok());
    }
    std::string out = dir.file(name);
    ASSERT_TRUE(w.write(out).ok());
    EXPECT_EQ(read_bytes(out), read_bytes(sample_path(name))) << name;
  }
}

TEST(Writer, StreamedAndSparseTensors) {
  ScratchDir dir;
  Writer w;
  w.metadata().set("general.architecture", "sparse");
  const uint64_t kBig = uint64_t{64} << 20;  // 64 MiB of zeros: must become a hole
  ASSERT_TRUE(w.add_tensor("per_layer_token_embd.weight", quant::Type::IQ4_NL, {160, static_cast<int64_t>(kBig / 90)},
                           TensorData::zeros()).ok());
  std::vector<uint8_t> expect = random_bytes(3 * 1000 * 4, 7);
  ASSERT_TRUE(w.add_tensor("streamed.weight", quant::Type::F32, {1000, 3},
                           TensorData::from_stream([&](TensorSink& sink) -> Status {
                             for (size_t off = 0; off < expect.size(); off += 1000) {
                               STRATA_TRY(sink.write(expect.data() + off, 1000));
                             }
                             return Status::ok_status();
                           })).ok());
  std::string path = dir.file("sparse.gguf");
  Status s = w.write(path);
  ASSERT_TRUE(s.ok()) << s.message();
  auto file = File::open(path);
  ASSERT_TRUE(file.ok()) << file.error();
  const TensorInfo& table = file->tensors()[0];
  EXPECT_TRUE(std::all_of(table.data, table.data + table.nbytes, [](uint8_t b) { return b == 0; }));
  const TensorInfo& streamed = file->tensors()[1];
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), streamed.data));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, table.nbytes / 2) << "the zero tensor was written, not skipped";
}

TEST(Writer, StreamOfWrongLengthFails) {
  ScratchDir dir;
  Writer w;
  ASSERT_TRUE(w.add_tensor("short.weight", quant::Type::F32, {4}, TensorData::from_stream([](TensorSink& sink) {
                             float x = 1;
                             return sink.write(&x, sizeof x);
                           })).ok());
  std::string path = dir.file("short.gguf");
  Status s = w.write(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor short.weight: stream wrote 4 bytes (expected 16)"), std::string::npos)
      << s.message();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  Writer w2;
  ASSERT_TRUE(w2.add_tensor("long.weight", quant::Type::F32, {1}, TensorData::from_stream([](TensorSink& sink) {
                              double x = 1;
                              return sink.write(&x, sizeof x);
                            })).ok());
  Status s2 = w2.write(dir.file("long.gguf"));
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("wrote more than the tensor's 4 bytes"), std::string::npos) << s2.message();
}

TEST(Writer, RefusesBadInput) {
  Writer w;
  std::vector<uint8_t> four(4);
  ASSERT_TRUE(w.add_tensor("a", quant::Type::F32, {1}, TensorData::copy(four)).ok());
  auto expect_error = [](const Status& s, const std::string& what) {
    ASSERT_FALSE(s.ok()) << what;
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  expect_error(w.add_tensor("a", quant::Type::F32, {1}, TensorData::copy(four)), "tensor a: duplicate tensor name");
  expect_error(w.add_tensor(std::string(64, 'n'), quant::Type::F32, {1}, TensorData::zeros()), "name is 64 bytes");
  expect_error(w.add_tensor("b", quant::Type::Q8_0, {33}, TensorData::zeros()), "not a multiple of the q8_0 block size 32");
  expect_error(w.add_tensor("c", static_cast<quant::Type>(4), {32}, TensorData::zeros()), "removed");
  expect_error(w.add_tensor("d", quant::Type::F32, {1, 1, 1, 1, 1}, TensorData::zeros()), "n_dims 5");
  expect_error(w.add_tensor("e", quant::Type::F32, {-1}, TensorData::zeros()), "ne[0] is negative");
  expect_error(w.add_tensor("f", quant::Type::F32, {2}, TensorData::copy(four)), "4 bytes of data (expected 8)");
  expect_error(w.add_tensor("g", quant::Type::F32, {}, TensorData::zeros()), "no dimensions");

  ScratchDir dir;
  Writer odd(48);
  expect_error(odd.write(dir.file("odd.gguf")), "alignment 48 is not a power of two");
  Writer mixed;
  mixed.metadata().set("bad", Value::array(ValueType::U32, {Value(uint32_t{1}), Value(std::string("x"))}));
  expect_error(mixed.write(dir.file("mixed.gguf")), "key bad: array of u32 holds a string");
  Writer disagree(64);
  disagree.metadata().set("general.alignment", uint32_t{32});
  expect_error(disagree.write(dir.file("disagree.gguf")), "general.alignment: disagrees");
}

TEST(Writer, Version2Reads) {
  ScratchDir dir;
  Writer w;
  w.set_version(2);
  w.metadata().set("general.architecture", "v2");
  ASSERT_TRUE(w.write(dir.file("v2.gguf")).ok());
  auto file = File::open(dir.file("v2.gguf"));
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->version(), 2u);
  EXPECT_TRUE(file->tensors().empty());
}

TEST(SplitSet, WriteAndOpenFromAnyShard) {
  ScratchDir dir;
  Writer w(64);
  w.metadata().set("general.architecture", "split");
  w.metadata().set("split.count", uint16_t{9});  // stale keys from a copied shard are replaced
  std::vector<std::vector<uint8_t>> data;
  // Shard 0 holds metadata only (as unsloth's shard 1 does); tensors spread over 1 and 2.
  for (int i = 0; i < 6; ++i) {
    data.push_back(random_bytes(4 * 16, 100 + i));
    ASSERT_TRUE(w.add_tensor(fmt::format("blk.{}.w", i), quant::Type::F32, {16}, TensorData::borrow(data.back()),
                             i < 4 ? 1 : 2).ok());
  }
  auto paths = w.write_split(dir.file("m"), 3);
  ASSERT_TRUE(paths.ok()) << paths.error();
  ASSERT_EQ(paths->size(), 3u);
  EXPECT_EQ((*paths)[0], dir.file("m-00001-of-00003.gguf"));
  for (const std::string& p : *paths) {
    auto model = Model::open(p);
    ASSERT_TRUE(model.ok()) << model.error();
    ASSERT_EQ(model->shards().size(), 3u);
    EXPECT_EQ(model->path(), (*paths)[0]);
    EXPECT_EQ(*model->metadata().get_string("general.architecture"), "split");
    EXPECT_EQ(*model->metadata().get_u16("split.count"), 3);
    EXPECT_EQ(*model->metadata().get_i32("split.tensors.count"), 6);
    EXPECT_TRUE(model->shards()[0].tensors().empty());
    EXPECT_EQ(model->shards()[2].alignment(), 64u);
    ASSERT_EQ(model->tensors().size(), 6u);
    for (int i = 0; i < 6; ++i) {
      const TensorInfo* t = model->find(fmt::format("blk.{}.w", i));
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->shard, i < 4 ? 1u : 2u);
      EXPECT_TRUE(std::equal(data[i].begin(), data[i].end(), t->data));
      EXPECT_EQ(t->data, model->shards()[t->shard].data() + t->file_offset);
    }
  }
}

TEST(SplitSet, NamesParse) {
  EXPECT_EQ(split_path("a/b", 0, 4), "a/b-00001-of-00004.gguf");
  auto n = parse_split_path("dir/Qwen-UD-Q4_K_XL-00003-of-00004.gguf");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->prefix, "dir/Qwen-UD-Q4_K_XL");
  EXPECT_EQ(n->no, 2u);
  EXPECT_EQ(n->count, 4u);
  EXPECT_FALSE(parse_split_path("model.gguf").has_value());
  EXPECT_FALSE(parse_split_path("m-00005-of-00004.gguf").has_value());
  EXPECT_FALSE(parse_split_path("m-00000-of-00004.gguf").has_value());
  EXPECT_FALSE(parse_split_path("m-0000a-of-00004.gguf").has_value());
  EXPECT_FALSE(parse_split_path("-00001-of-00004.gguf").has_value());
}

TEST(Reader, AcceptsAnyAlignedNonOverlappingLayout) {
  // Tensors out of order, with gaps: not the strict running sum, but valid per the spec.
  ScratchDir dir;
  RawGguf g = valid_raw();
  g.tensors[0].offset = 512;
  g.tensors[1].offset = 64;
  g.tensors[2].offset = 0;
  g.data_bytes = 640;
  write_bytes(dir.file("loose.gguf"), g.build());
  auto file = File::open(dir.file("loose.gguf"));
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->tensors()[0].offset, 512u);
  // No padding after the last tensor is fine too.
  RawGguf tight = valid_raw();
  tight.data_bytes = 288 + 32;  // c.weight ends exactly at the end of the file
  write_bytes(dir.file("tight.gguf"), tight.build());
  EXPECT_TRUE(File::open(dir.file("tight.gguf")).ok());
}

TEST(Reader, ParsesFromMemory) {
  auto bytes = read_bytes(sample_path("tiny-align32.gguf"));
  auto file = File::parse(bytes, "memory");
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->path(), "memory");
  EXPECT_EQ(file->tensors()[0].data, bytes.data() + 960);
  bytes[0] = 'X';
  auto bad = File::parse(bytes, "memory");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("gguf: memory: header: bad magic"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace strata::gguf
