// `strata inspect` end to end: a synthetic qwen4exp file (tiny shapes, every role, a sparse
// 1 GB n-gram table), text and JSON output, split sets, and errors.
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../gguf/gguf_test_util.h"
#include "strata/gguf/writer.h"
#include "strata/model/tensor_role.h"

namespace strata::cli {
namespace {

using namespace strata::gguf::testing;
using gguf::TensorData;
using quant::Type;

struct Spec {
  std::string name;
  Type type;
  std::vector<int64_t> ne;
};

// blk.0 is GDN + PLE, blk.1 attention, blk.2 the MTP block (block_count 3, one nextn layer).
const std::vector<Spec> kSpecs = {
    {"token_embd.weight", Type::Q8_0, {64, 16}},
    {"output.weight", Type::Q8_0, {64, 16}},
    {"output_hc_norm.weight", Type::F32, {256}},
    {"per_layer_token_embd.weight", Type::IQ4_NL, {160, 12500000}},  // 1.125 GB, left as a hole
    {"blk.0.hc_attn_norm.weight", Type::F32, {256}},
    {"blk.0.ffn_gate_inp.weight", Type::F32, {64, 8}},
    {"blk.0.ffn_gate_exps.weight", Type::Q4_K, {256, 4, 8}},
    {"blk.0.ffn_up_exps.weight", Type::Q4_K, {256, 4, 8}},
    {"blk.0.ffn_down_exps.weight", Type::Q5_1, {64, 256, 8}},
    {"blk.0.ffn_gate_shexp.weight", Type::Q8_0, {64, 4}},
    {"blk.0.ffn_gate_inp_shexp.weight", Type::F32, {64}},
    {"blk.0.attn_qkv.weight", Type::Q8_0, {64, 96}},
    {"blk.0.ssm_a", Type::F32, {6}},
    {"blk.0.ple_key.weight", Type::Q8_0, {64, 256}},
    {"blk.1.attn_q.weight", Type::Q8_0, {64, 128}},
    {"blk.1.indexer.q_proj.weight", Type::BF16, {64, 32}},
    {"blk.2.attn_q.weight", Type::Q8_0, {64, 128}},
    {"blk.2.nextn.eh_proj.weight", Type::BF16, {128, 64}},
};

uint64_t nbytes(const Spec& s) {
  auto info = *quant::type_info(s.type);
  uint64_t n = static_cast<uint64_t>(s.ne[0]) / info.block_size * info.type_size;
  for (size_t i = 1; i < s.ne.size(); ++i) n *= static_cast<uint64_t>(s.ne[i]);
  return n;
}

uint64_t elements(const Spec& s) {
  uint64_t n = 1;
  for (int64_t d : s.ne) n *= static_cast<uint64_t>(d);
  return n;
}

gguf::Writer qwen_writer() {
  gguf::Writer w;
  w.metadata().set("general.architecture", "qwen4exp");
  w.metadata().set("qwen4exp.block_count", uint32_t{3});
  w.metadata().set("qwen4exp.nextn_predict_layers", uint32_t{1});
  std::vector<uint32_t> long_array(100);
  for (uint32_t i = 0; i < 100; ++i) long_array[i] = i;
  w.metadata().set("qwen4exp.attention.compress_ratios", gguf::Value::array(long_array));
  for (const Spec& s : kSpecs) {
    // Data is all zeros: the file stays small on disk whatever the shapes say.
    EXPECT_TRUE(w.add_tensor(s.name, s.type, s.ne, TensorData::zeros()).ok()) << s.name;
  }
  return w;
}

TEST(Inspect, JsonRolesAreExact) {
  ScratchDir dir;
  std::string path = dir.file("q.gguf");
  ASSERT_TRUE(qwen_writer().write(path).ok());
  CliResult r = run_strata("inspect --json --tensors '" + path + "'", dir.file("cli"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["files"].size(), 1u);
  const auto& f = doc["files"][0];
  EXPECT_EQ(f["metadata"]["general.architecture"]["value"], "qwen4exp");
  const auto& ratios = f["metadata"]["qwen4exp.attention.compress_ratios"];
  EXPECT_EQ(ratios["type"], "array[u32]");
  EXPECT_EQ(ratios["count"], 100);
  EXPECT_EQ(ratios["first"].size(), 8u);
  EXPECT_EQ(f["tensors"].size(), kSpecs.size());

  std::map<std::string, std::pair<uint64_t, uint64_t>> want;  // role -> bytes, elements
  uint64_t total = 0;
  for (const Spec& s : kSpecs) {
    auto role = std::string(model::role_name(model::classify_tensor(s.name, 3, 1)));
    want[role].first += nbytes(s);
    want[role].second += elements(s);
    total += nbytes(s);
  }
  EXPECT_EQ(want.count("mtp"), 1u);
  EXPECT_EQ(want["mtp"].first, nbytes(kSpecs[16]) + nbytes(kSpecs[17]));
  ASSERT_EQ(f["roles"].size(), want.size());
  for (const auto& [role, bw] : want) {
    ASSERT_TRUE(f["roles"].contains(role)) << role;
    EXPECT_EQ(f["roles"][role]["bytes"].get<uint64_t>(), bw.first) << role;
    EXPECT_EQ(f["roles"][role]["elements"].get<uint64_t>(), bw.second) << role;
  }
  EXPECT_DOUBLE_EQ(f["roles"]["ngram_table"]["bits_per_weight"].get<double>(), 4.5);
  EXPECT_EQ(f["total"]["bytes"].get<uint64_t>(), total);
}

TEST(Inspect, TextShowsRolesAndHumanSizes) {
  ScratchDir dir;
  std::string path = dir.file("q.gguf");
  ASSERT_TRUE(qwen_writer().write(path).ok());
  CliResult r = run_strata("inspect '" + path + "'", dir.file("cli"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("qwen4exp roles"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ngram_table"), std::string::npos);
  EXPECT_NE(r.out.find("1.13 GB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("routed_gate"), std::string::npos);
  EXPECT_NE(r.out.find("count 100: 0 1 2 3 4 5 6 7 ..."), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("blk.0.ssm_a "), std::string::npos) << "no tensor table without --tensors";
  CliResult t = run_strata("inspect --tensors '" + path + "'", dir.file("cli"));
  EXPECT_NE(t.out.find("blk.0.ssm_a "), std::string::npos) << t.out;
}

TEST(Inspect, SplitSetAndBadFiles) {
  ScratchDir dir;
  gguf::Writer w;
  w.metadata().set("general.architecture", "llama");
  std::vector<uint8_t> four(4);
  ASSERT_TRUE(w.add_tensor("a", Type::F32, {1}, TensorData::copy(four), 1).ok());
  ASSERT_TRUE(w.write_split(dir.file("s"), 2).ok());
  std::string bad = dir.file("bad.gguf");
  write_bytes(bad, {'G', 'G', 'U', 'F', 3, 0});
  CliResult r = run_strata("inspect --json '" + dir.file("s-00002-of-00002.gguf") + "' '" + bad + "'", dir.file("cli"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("strata inspect: gguf: " + bad + ": header: truncated version"), std::string::npos) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["files"].size(), 1u);
  EXPECT_EQ(doc["files"][0]["shards"].size(), 2u);
  EXPECT_FALSE(doc["files"][0].contains("roles")) << "not qwen4exp";

  CliResult missing = run_strata("inspect '" + dir.file("nope.gguf") + "'", dir.file("cli"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos) << missing.err;
  CliResult none = run_strata("inspect", dir.file("cli"));
  EXPECT_NE(none.exit_code, 0);
}

}  // namespace
}  // namespace strata::cli
