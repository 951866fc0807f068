// Malformed single files, generated from the reference sample and from a small valid RawGguf.
// Each must be rejected with a message naming the file and the item, and `strata inspect`
// must fail with that message (see expect_rejected). Split-set cases are in
// split_corruption_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gguf_test_util.h"
#include "strata/gguf/gguf.h"

namespace strata::gguf {
namespace {

using namespace strata::gguf::testing;

constexpr uint64_t kMinusOne = ~uint64_t{0};

// tiny-align32.gguf field offsets (spec §1.12): version at 4, counts at 8 and 16, the first
// key's length at 24, its value type at 52 and its string length at 56.
Corruption sample_case(std::string name, std::function<void(std::vector<uint8_t>&)> edit,
                       std::vector<std::string> expect) {
  auto make = [edit](const ScratchDir& dir) {
    auto bytes = read_bytes(sample_path("tiny-align32.gguf"));
    edit(bytes);
    std::string path = dir.file("bad.gguf");
    write_bytes(path, bytes);
    return path;
  };
  return {std::move(name), make, std::move(expect), {}};
}

Corruption raw_case(std::string name, std::function<void(RawGguf&)> edit, std::vector<std::string> expect) {
  auto make = [edit](const ScratchDir& dir) {
    RawGguf g = valid_raw();
    edit(g);
    std::string path = dir.file("bad.gguf");
    write_bytes(path, g.build());
    return path;
  };
  return {std::move(name), make, std::move(expect), {}};
}

Corruption truncated_case(size_t size) {
  return sample_case(fmt::format("truncated_at_{}", size), [size](auto& b) { b.resize(size); }, {"truncated"});
}

// An array value nested `depth` levels deep around one u8.
std::vector<uint8_t> nested_payload(int depth) {
  Bytes b;
  for (int i = 1; i < depth; ++i) b.put<uint32_t>(9).put<uint64_t>(1);
  b.put<uint32_t>(0).put<uint64_t>(1).put<uint8_t>(7);
  return b.data;
}

std::vector<Corruption> header_and_metadata_cases() {
  std::vector<Corruption> c;
  for (size_t cut : {0, 3, 6, 12, 20, 24, 40, 100, 300, 500, 700, 716, 800, 900, 932, 940, 1000, 1300, 1391}) {
    c.push_back(truncated_case(cut));
  }
  c.push_back(sample_case("bad_magic", [](auto& b) { b[3] = 'X'; }, {"header: bad magic 0x58554747"}));
  c.push_back(sample_case("version_0", [](auto& b) { patch<uint32_t>(b, 4, 0); }, {"header: version 0 is invalid"}));
  c.push_back(sample_case("version_1", [](auto& b) { patch<uint32_t>(b, 4, 1); }, {"header: version 1 is obsolete"}));
  c.push_back(sample_case("version_4", [](auto& b) { patch<uint32_t>(b, 4, 4); }, {"header: unsupported version 4 (expected 2 or 3)"}));
  c.push_back(sample_case("big_endian", [](auto& b) { patch<uint32_t>(b, 4, 0x03000000); },
                          {"header: version 0x03000000", "big-endian"}));
  c.push_back(sample_case("negative_tensor_count", [](auto& b) { patch<uint64_t>(b, 8, kMinusOne); },
                          {"header: negative tensor count -1"}));
  c.push_back(sample_case("negative_kv_count", [](auto& b) { patch<uint64_t>(b, 16, kMinusOne - 4); },
                          {"header: negative kv count -5"}));
  c.push_back(sample_case("huge_kv_count", [](auto& b) { patch<uint64_t>(b, 16, uint64_t{1} << 40); },
                          {"header: kv count 1099511627776 cannot fit"}));
  c.push_back(sample_case("huge_tensor_count", [](auto& b) { patch<uint64_t>(b, 8, uint64_t{1} << 40); },
                          {"header: tensor count 1099511627776 cannot fit"}));
  c.push_back(sample_case("key_length_absurd", [](auto& b) { patch<uint64_t>(b, 24, uint64_t{1} << 40); },
                          {"kv #0: key length 1099511627776 is absurd"}));
  c.push_back(sample_case("key_length_past_end", [](auto& b) { patch<uint64_t>(b, 24, 5000); },
                          {"kv #0: truncated key: need 5000 bytes"}));
  c.push_back(sample_case("string_length_absurd", [](auto& b) { patch<uint64_t>(b, 56, uint64_t{1} << 31); },
                          {"key general.architecture: string value length 2147483648 is absurd"}));
  c.push_back(sample_case("string_length_past_end", [](auto& b) { patch<uint64_t>(b, 56, 100000); },
                          {"key general.architecture: truncated string value"}));
  c.push_back(sample_case("unknown_value_type", [](auto& b) { patch<uint32_t>(b, 52, 13); },
                          {"key general.architecture: unknown value type 13"}));
  c.push_back(raw_case("unknown_array_elem_type",
                       [](RawGguf& g) { g.kv("test.arr", 9, Bytes().put<uint32_t>(99).put<uint64_t>(1).data); },
                       {"key test.arr: unknown array element type 99"}));
  c.push_back(raw_case("array_count_absurd",
                       [](RawGguf& g) { g.kv("test.arr", 9, Bytes().put<uint32_t>(0).put<uint64_t>(uint64_t{1} << 31).data); },
                       {"key test.arr: array count 2147483648 is absurd"}));
  c.push_back(raw_case("array_count_past_end",
                       [](RawGguf& g) { g.kv("test.arr", 9, Bytes().put<uint32_t>(10).put<uint64_t>(1000).data); },
                       {"key test.arr: truncated array: 1000 elements of u64"}));
  c.push_back(raw_case("string_array_past_end",
                       [](RawGguf& g) {
                         g.kv("tokenizer.ggml.tokens", 9, Bytes().put<uint32_t>(8).put<uint64_t>(2).str("a").put<uint64_t>(1 << 20).data);
                       },
                       {"key tokenizer.ggml.tokens: truncated string value"}));
  c.push_back(raw_case("nested_array_too_deep", [](RawGguf& g) { g.kv("test.deep", 9, nested_payload(kMaxArrayDepth + 1)); },
                       {"key test.deep: arrays nested deeper than 8 levels"}));
  c.push_back(raw_case("duplicate_key", [](RawGguf& g) { g.kv_str("general.architecture", "again"); },
                       {"key general.architecture: duplicate key"}));
  c.push_back(raw_case("empty_key", [](RawGguf& g) { g.kv_str("", "x"); }, {"kv #2: empty key"}));
  c.push_back(raw_case("alignment_wrong_type", [](RawGguf& g) { g.kv_str("general.alignment", "64"); },
                       {"key general.alignment: expected u32, got string"}));
  c.push_back(raw_case("alignment_u64", [](RawGguf& g) { g.kv_scalar<uint64_t>("general.alignment", 10, 64); },
                       {"key general.alignment: expected u32, got u64"}));
  c.push_back(raw_case("alignment_not_power_of_two",
                       [](RawGguf& g) { g.kv_scalar<uint32_t>("general.alignment", 4, 48); },
                       {"key general.alignment: value 48 is not a power of two"}));
  c.push_back(raw_case("alignment_zero", [](RawGguf& g) { g.kv_scalar<uint32_t>("general.alignment", 4, 0); },
                       {"key general.alignment: value 0 is not a power of two"}));
  return c;
}

std::vector<Corruption> tensor_cases() {
  std::vector<Corruption> c;
  c.push_back(raw_case("tensor_count_past_infos",
                       [](RawGguf& g) { g.tensor_count_override = 4; g.data_bytes = 0; g.alignment = 1; },
                       {"tensor #3: truncated name length"}));
  c.push_back(raw_case("tensor_name_too_long", [](RawGguf& g) { g.tensors[1].name = std::string(64, 'x'); },
                       {"tensor " + std::string(64, 'x') + ": name is 64 bytes (expected at most 63)"}));
  c.push_back(raw_case("tensor_name_empty", [](RawGguf& g) { g.tensors[0].name.clear(); }, {"tensor #0: empty tensor name"}));
  c.push_back(raw_case("tensor_name_absurd_length", [](RawGguf& g) { g.tensors[0].name = std::string(70000, 'y'); },
                       {"tensor yyyyyyyyyy", "...(70000 bytes): name is 70000 bytes"}));
  c.push_back(raw_case("duplicate_tensor_name", [](RawGguf& g) { g.tensors[2].name = "a.weight"; },
                       {"tensor a.weight: duplicate tensor name"}));
  c.push_back(raw_case("n_dims_5",
                       [](RawGguf& g) { g.tensors[0].ne = {8, 4, 1, 1, 1}; },
                       {"tensor a.weight: n_dims 5 (expected at most 4)"}));
  c.push_back(raw_case("n_dims_huge", [](RawGguf& g) { g.tensors[0].n_dims_override = 0xffffffff; },
                       {"tensor a.weight: n_dims 4294967295"}));
  c.push_back(raw_case("negative_dim", [](RawGguf& g) { g.tensors[0].ne = {8, kMinusOne - 1}; },
                       {"tensor a.weight: ne[1] is negative (-2)"}));
  c.push_back(raw_case("element_count_overflow",
                       [](RawGguf& g) { g.tensors[0].ne = {uint64_t{1} << 32, uint64_t{1} << 32, 4}; },
                       {"tensor a.weight: element count", "overflows int64"}));
  c.push_back(raw_case("row_count_overflow_with_empty_rows",
                       [](RawGguf& g) { g.tensors[0].ne = {0, uint64_t{1} << 40, uint64_t{1} << 40, 2}; },
                       {"tensor a.weight: row count of ne [0, 1099511627776, 1099511627776, 2] overflows int64"}));
  c.push_back(raw_case("byte_size_overflow", [](RawGguf& g) { g.tensors[0].ne = {uint64_t{1} << 62}; },
                       {"tensor a.weight: byte size of f32", "overflows"}));
  c.push_back(raw_case("byte_size_overflow_f64",
                       [](RawGguf& g) { g.tensors[0].ne = {uint64_t{1} << 31, uint64_t{1} << 30}; g.tensors[0].type = 28; },
                       {"tensor a.weight: byte size of f64"}));
  c.push_back(raw_case("unknown_type_id", [](RawGguf& g) { g.tensors[1].type = 43; },
                       {"tensor b.weight: unknown type id 43 (expected < 43)"}));
  c.push_back(raw_case("unknown_type_id_huge", [](RawGguf& g) { g.tensors[1].type = 0xffffffff; },
                       {"tensor b.weight: unknown type id 4294967295"}));
  c.push_back(raw_case("removed_type_id", [](RawGguf& g) { g.tensors[1].type = 4; },
                       {"tensor b.weight: type id 4 (q4_2) was removed"}));
  c.push_back(raw_case("removed_repacked_type_id", [](RawGguf& g) { g.tensors[1].type = 37; },
                       {"tensor b.weight: type id 37 (iq4_nl_4_8) was removed"}));
  c.push_back(raw_case("ne0_not_block_multiple", [](RawGguf& g) { g.tensors[1].ne = {48, 2}; },
                       {"tensor b.weight: ne[0] = 48 is not a multiple of the q8_0 block size 32"}));
  c.push_back(raw_case("offset_out_of_range", [](RawGguf& g) { g.tensors[2].offset = uint64_t{1} << 40; },
                       {"tensor c.weight: data out of range"}));
  c.push_back(raw_case("offset_wraps", [](RawGguf& g) { g.tensors[2].offset = kMinusOne - 31; },
                       {"tensor c.weight: data out of range"}));
  c.push_back(raw_case("misaligned_offset", [](RawGguf& g) { g.tensors[2].offset = 290; },
                       {"tensor c.weight: misaligned offset 290 (expected a multiple of 32)"}));
  c.push_back(raw_case("misaligned_for_alignment_64",
                       [](RawGguf& g) { g.kv_scalar<uint32_t>("general.alignment", 4, 64); g.alignment = 64; },
                       {"tensor c.weight: misaligned offset 288 (expected a multiple of 64)"}));
  c.push_back(raw_case("overlapping_tensors", [](RawGguf& g) { g.tensors[1].offset = 96; },
                       {"tensor b.weight: data [96, 232) overlaps tensor a.weight at [0, 128)"}));
  c.push_back(raw_case("same_offset", [](RawGguf& g) { g.tensors[2].offset = 128; }, {"overlaps tensor"}));
  c.push_back(raw_case("data_truncated", [](RawGguf& g) { g.data_bytes = 300; },
                       {"tensor c.weight: data out of range or truncated"}));
  c.push_back(sample_case("data_section_missing", [](auto& b) { b.resize(932); },
                          {"data section: truncated: starts at 960 but the file has 932 bytes"}));
  c.push_back(sample_case("sample_tensor_type_removed", [](auto& b) { patch<uint32_t>(b, 0x330 + 3, 5); },
                          {"tensor blk.0.attn_q.weight: type id 5 (q4_3) was removed"}));
  return c;
}

class HeaderAndMetadata : public ::testing::TestWithParam<Corruption> {};
TEST_P(HeaderAndMetadata, Rejected) { expect_rejected(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Corrupt, HeaderAndMetadata, ::testing::ValuesIn(header_and_metadata_cases()), case_name);

class Tensors : public ::testing::TestWithParam<Corruption> {};
TEST_P(Tensors, Rejected) { expect_rejected(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Corrupt, Tensors, ::testing::ValuesIn(tensor_cases()), case_name);

// The baseline of the raw cases is valid, so each case fails for its own reason only; nested
// arrays within the depth bound are accepted.
TEST(CorruptionBaseline, ValidRawAndNestedArraysAreAccepted) {
  ScratchDir dir;
  RawGguf g = valid_raw();
  g.kv("test.nested", 9, nested_payload(kMaxArrayDepth));
  write_bytes(dir.file("ok.gguf"), g.build());
  auto file = File::open(dir.file("ok.gguf"));
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->tensors().size(), 3u);
  const Value* v = file->metadata().find("test.nested");
  ASSERT_NE(v, nullptr);
  int depth = 0;
  while (v->type() == ValueType::Array) {
    ++depth;
    v = &v->as<Array>().items.at(0);
  }
  EXPECT_EQ(depth, kMaxArrayDepth);
  EXPECT_EQ(v->as<uint8_t>(), 7);
}

}  // namespace
}  // namespace strata::gguf
