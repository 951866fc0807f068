// Malformed split sets: missing or corrupt shards, split.* keys that disagree with each other
// or with the file names, tensors duplicated across shards, a wrong total.
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gguf_test_util.h"
#include "strata/gguf/gguf.h"
#include "strata/gguf/writer.h"

namespace strata::gguf {
namespace {

using namespace strata::gguf::testing;

struct ShardSpec {
  int64_t no = 0;                 // split.no (u16), -1 to omit the split keys entirely
  int64_t count = 2;              // split.count (u16)
  int64_t total = 2;              // split.tensors.count (i32), -1 to omit
  std::vector<std::string> tensors;  // f32 [8] each, 32 bytes
};

RawGguf shard(const ShardSpec& s) {
  RawGguf g;
  if (s.no == 0) g.kv_str("general.architecture", "test");
  if (s.no >= 0) {
    g.kv_scalar<uint16_t>("split.no", 2, static_cast<uint16_t>(s.no));
    g.kv_scalar<uint16_t>("split.count", 2, static_cast<uint16_t>(s.count));
    if (s.total >= 0) g.kv_scalar<int32_t>("split.tensors.count", 5, static_cast<int32_t>(s.total));
  }
  uint64_t offset = 0;
  for (const std::string& name : s.tensors) {
    g.tensors.push_back({name, {8}, 0, offset});
    offset += 32;
  }
  g.data_bytes = offset;
  return g;
}

// Writes shards as name -> spec and opens `open`.
Corruption set_case(std::string name, std::vector<std::pair<std::string, ShardSpec>> shards, std::string open,
                    std::vector<std::string> expect, std::string names_file = {}) {
  auto make = [shards, open](const ScratchDir& dir) {
    for (const auto& [file, spec] : shards) write_bytes(dir.file(file), shard(spec).build());
    return dir.file(open);
  };
  return {std::move(name), make, std::move(expect), std::move(names_file)};
}

// A good two-shard set: metadata-only shard 1, tensors a and b in shard 2.
std::vector<std::pair<std::string, ShardSpec>> good_set() {
  return {{"m-00001-of-00002.gguf", {0, 2, 2, {}}}, {"m-00002-of-00002.gguf", {1, 2, 2, {"a", "b"}}}};
}

std::vector<Corruption> split_cases() {
  std::vector<Corruption> c;
  {
    auto set = good_set();
    set.pop_back();
    c.push_back(set_case("missing_shard", set, "m-00001-of-00002.gguf", {"shard 2 of 2 missing or invalid", "cannot open"},
                         "m-00002-of-00002.gguf"));
  }
  {
    Corruption missing_middle = {"missing_middle_shard_of_writer_set",
                                 [](const ScratchDir& dir) {
                                   Writer w;
                                   std::vector<uint8_t> four(4);
                                   for (uint32_t s = 0; s < 3; ++s) {
                                     EXPECT_TRUE(w.add_tensor(fmt::format("t{}", s), quant::Type::F32, {1},
                                                              TensorData::copy(four), s).ok());
                                   }
                                   auto paths = w.write_split(dir.file("w"), 3);
                                   EXPECT_TRUE(paths.ok());
                                   std::filesystem::remove(dir.file("w-00002-of-00003.gguf"));
                                   return dir.file("w-00003-of-00003.gguf");
                                 },
                                 {"shard 2 of 3 missing"},
                                 "w-00002-of-00003.gguf"};
    c.push_back(missing_middle);
  }
  {
    auto set = good_set();
    set[0].second.count = 3;
    c.push_back(set_case("split_count_disagrees_with_name", set, "m-00001-of-00002.gguf",
                         {"mismatched split.count: key says 3, file name says 2"}));
  }
  {
    auto set = good_set();
    set[1].second.count = 3;
    c.push_back(set_case("shard_split_count_disagrees", set, "m-00001-of-00002.gguf",
                         {"mismatched split.count: this shard says 3"}, "m-00002-of-00002.gguf"));
  }
  {
    auto set = good_set();
    set[1].second.no = 0;
    c.push_back(set_case("wrong_split_no_opened", set, "m-00002-of-00002.gguf",
                         {"wrong split.no: key says 0 (0-based), file name says shard 2"}));
    c.push_back(set_case("wrong_split_no_other_shard", set, "m-00001-of-00002.gguf",
                         {"wrong split.no: expected 1, got 0"}, "m-00002-of-00002.gguf"));
  }
  {
    auto set = good_set();
    set[0].second.tensors = {"b"};
    set[0].second.total = 3;
    set[1].second.total = 3;
    c.push_back(set_case("duplicate_tensor_across_shards", set, "m-00002-of-00002.gguf",
                         {"tensor b: duplicate tensor name across shards (also in", "m-00001-of-00002.gguf"},
                         "m-00002-of-00002.gguf"));
  }
  {
    auto set = good_set();
    set[0].second.total = 5;
    c.push_back(set_case("tensor_total_mismatch", set, "m-00002-of-00002.gguf",
                         {"key split.tensors.count: says 5, but 2 tensors were found in 2 shard(s)"}, "m-00001-of-00002.gguf"));
  }
  {
    auto set = good_set();
    set[0].second.total = -1;
    c.push_back(set_case("tensor_total_missing", set, "m-00001-of-00002.gguf", {"key split.tensors.count: missing in"}));
  }
  {
    auto set = good_set();
    set[1].second.no = -1;
    c.push_back(set_case("shard_without_split_keys", set, "m-00001-of-00002.gguf",
                         {"key split.count: missing in a shard of a 2-file split set"}, "m-00002-of-00002.gguf"));
  }
  c.push_back(set_case("split_name_not_a_pattern", {{"model.gguf", {0, 2, 2, {"a"}}}}, "model.gguf",
                       {"split.count is 2 but the file name is not"}));
  c.push_back(set_case("split_no_out_of_range", {{"m-00001-of-00002.gguf", {5, 2, 2, {}}}}, "m-00001-of-00002.gguf",
                       {"key split.no: value 5 out of range for split.count 2"}));
  c.push_back(set_case("split_count_zero", {{"m-00001-of-00002.gguf", {0, 0, 2, {}}}}, "m-00001-of-00002.gguf",
                       {"key split.count: value 0 out of range"}));
  c.push_back(set_case("single_file_total_mismatch", {{"one.gguf", {0, 1, 7, {"a"}}}}, "one.gguf",
                       {"split.tensors.count: says 7, but 1 tensors were found in 1 shard(s)"}));
  {
    Corruption wrong_type = {"split_count_wrong_type",
                             [](const ScratchDir& dir) {
                               RawGguf g;
                               g.kv_str("split.count", "2");
                               write_bytes(dir.file("m-00001-of-00002.gguf"), g.build());
                               return dir.file("m-00001-of-00002.gguf");
                             },
                             {"key split.count: expected an unsigned integer, got string"},
                             {}};
    c.push_back(wrong_type);
  }
  {
    Corruption corrupt_shard = {"corrupt_other_shard",
                                [](const ScratchDir& dir) {
                                  for (const auto& [file, spec] : good_set()) write_bytes(dir.file(file), shard(spec).build());
                                  auto bytes = read_bytes(dir.file("m-00002-of-00002.gguf"));
                                  bytes.erase(bytes.end() - 10, bytes.end());  // cut into b's data
                                  write_bytes(dir.file("m-00002-of-00002.gguf"), bytes);
                                  return dir.file("m-00001-of-00002.gguf");
                                },
                                {"shard 2 of 2 missing or invalid", "tensor b: data out of range or truncated"},
                                "m-00002-of-00002.gguf"};
    c.push_back(corrupt_shard);
  }
  return c;
}

class SplitSets : public ::testing::TestWithParam<Corruption> {};
TEST_P(SplitSets, Rejected) { expect_rejected(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Corrupt, SplitSets, ::testing::ValuesIn(split_cases()), case_name);

TEST(SplitSetBaseline, GoodSetOpensFromEitherShard) {
  ScratchDir dir;
  for (const auto& [file, spec] : good_set()) write_bytes(dir.file(file), shard(spec).build());
  for (const char* name : {"m-00001-of-00002.gguf", "m-00002-of-00002.gguf"}) {
    auto model = Model::open(dir.file(name));
    ASSERT_TRUE(model.ok()) << model.error();
    EXPECT_EQ(model->tensors().size(), 2u);
    EXPECT_EQ(model->find("b")->shard, 1u);
    EXPECT_EQ(*model->metadata().get_string("general.architecture"), "test");
  }
}

}  // namespace
}  // namespace strata::gguf
