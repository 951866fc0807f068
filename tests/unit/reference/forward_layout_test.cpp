// The forward does not depend on storage choices: fused vs split expert gate/up give the
// same logits bit for bit, and so do different thread counts. Also pins the stage order
// (STYLE habit 6) that `strata parity` dumps are keyed by.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "strata/reference/forward.h"
#include "tiny_model.h"

namespace strata {
namespace {

// Rewrites a split-expert file into the fused ffn_gate_up_exps layout (per expert: gate rows,
// then up rows), copying everything else byte for byte.
Status fuse_experts(const std::string& in, const std::string& out) {
  auto file = gguf::Model::open(in);
  if (!file) return file.status();
  gguf::Writer w;
  for (const gguf::KeyValue& kv : file->metadata().entries()) w.metadata().set(kv.key, kv.value);
  for (const gguf::TensorInfo& t : file->tensors()) {
    const std::string& name = t.name;
    if (name.find("ffn_up_exps") != std::string::npos) continue;
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (const size_t p = name.find("ffn_gate_exps"); p != std::string::npos) {
      const gguf::TensorInfo* up = file->find(name.substr(0, p) + "ffn_up_exps.weight");
      const size_t expert_bytes = t.nbytes / t.ne[2];
      std::vector<uint8_t> bytes;
      for (int64_t e = 0; e < t.ne[2]; ++e) {
        bytes.insert(bytes.end(), t.data + e * expert_bytes, t.data + (e + 1) * expert_bytes);
        bytes.insert(bytes.end(), up->data + e * expert_bytes, up->data + (e + 1) * expert_bytes);
      }
      ne[1] *= 2;
      STRATA_TRY(w.add_tensor(name.substr(0, p) + "ffn_gate_up_exps.weight", t.type, ne,
                              gguf::TensorData::own(std::move(bytes))));
      continue;
    }
    STRATA_TRY(w.add_tensor(name, t.type, ne, gguf::TensorData::copy(t.bytes())));
  }
  return w.write(out);
}

std::vector<float> logits_of(const std::string& path, int threads, const std::vector<int32_t>& tokens,
                             reference::StageSink* sink = nullptr) {
  auto m = reference::Model::open(path, threads);
  EXPECT_TRUE(m.ok()) << m.error();
  if (!m.ok()) return {};
  reference::SequenceState s = reference::SequenceState::create((*m)->config());
  reference::ForwardOptions fo;
  fo.sink = sink;
  auto out = reference::forward(**m, s, tokens, fo);
  EXPECT_TRUE(out.ok()) << out.error();
  return out.ok() ? out->logits : std::vector<float>{};
}

const std::vector<int32_t> kTokens = {1, 7, 5, 5, 9, 33, 2, 17, 60, 5, 11, 12, 13, 40, 41, 42, 3, 8, 9, 10};

TEST(ForwardLayout, FusedGateUpEqualsSplit) {
  const std::string split = testing::temp_path("split.gguf"), fused = testing::temp_path("fused.gguf");
  testing::TinySpec spec;
  spec.quantized = true;  // Q8_0 experts: the fused rows are whole blocks too
  ASSERT_TRUE(testing::write_tiny_model(spec, split).ok());
  const Status s = fuse_experts(split, fused);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<float> a = logits_of(split, 2, kTokens), b = logits_of(fused, 2, kTokens);
  std::remove(split.c_str());
  std::remove(fused.c_str());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

TEST(ForwardLayout, ThreadCountDoesNotChangeResults) {
  const std::string path = testing::temp_path("threads.gguf");
  ASSERT_TRUE(testing::write_tiny_model({}, path).ok());
  const std::vector<float> a = logits_of(path, 1, kTokens), b = logits_of(path, 3, kTokens);
  std::remove(path.c_str());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

TEST(ForwardLayout, StagesInModelOrder) {
  const std::string path = testing::temp_path("stages.gguf");
  ASSERT_TRUE(testing::write_tiny_model({}, path).ok());
  std::vector<std::string> names;
  reference::StageSink sink = [&](std::string_view stage, int block, int64_t pos0, int64_t n_rows,
                                  std::span<const float> rows) {
    EXPECT_EQ(pos0, 0);
    EXPECT_EQ(rows.size() % static_cast<size_t>(n_rows), 0u);
    names.push_back(std::string(stage) + "@" + std::to_string(block));
  };
  logits_of(path, 1, kTokens, &sink);
  std::remove(path.c_str());
  const std::vector<std::string> block = {"hc_attn_mix", "hc_attn_combine", "hc_ffn_mix", "router", "experts", "shared",
                                          "hc_ffn_combine"};
  std::vector<std::string> want = {"embed@-1"};
  for (int b = 0; b < 4; ++b) {
    const std::string at = "@" + std::to_string(b);
    if (b == 1) want.push_back("ple" + at);
    want.push_back(block[0] + at);
    want.push_back((b == 3 ? "qsa" : "gdn") + at);
    for (size_t i = 1; i < block.size(); ++i) want.push_back(block[i] + at);
  }
  want.push_back("output_mix@-1");
  want.push_back("head@-1");
  EXPECT_EQ(names, want);
}

}  // namespace
}  // namespace strata
