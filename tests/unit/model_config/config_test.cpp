// ModelConfig validation (every key of spec/gguf-layout.md §2) and Weights binding errors.
#include <gtest/gtest.h>

#include <cstdio>

#include "../reference/tiny_model.h"
#include "strata/model/config.h"
#include "strata/model/weights.h"

namespace strata {
namespace {

using model::load_config;
using model::Mixer;

gguf::Metadata tiny_md(const testing::TinySpec& spec = {}) {
  gguf::Metadata md;
  testing::tiny_metadata(spec, md);
  return md;
}

// load_config must fail with exactly this message.
void expect_error(const gguf::Metadata& md, const std::string& message) {
  auto c = load_config(md, "tiny.gguf");
  ASSERT_FALSE(c.ok()) << "expected: " << message;
  EXPECT_EQ(c.error(), message);
}

TEST(ModelConfig, ReadsTheTinyGeometryAndPlan) {
  auto c = load_config(tiny_md(), "tiny.gguf");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->n_embd, 32u);
  EXPECT_EQ(c->n_wide(), 128u);
  EXPECT_EQ(c->ssm_conv_dim(), 2u * 2 * 8 + 4 * 8);
  EXPECT_TRUE(c->qsa);
  EXPECT_EQ(c->compress_ratio, 4u);
  EXPECT_EQ(c->indexer_top_blocks(), 2u);
  EXPECT_TRUE(c->has_ple);
  EXPECT_EQ(c->ple.n_heads, 4u);
  EXPECT_EQ(c->ple.history(), 9u);
  const model::LayerPlan& p = c->plan;
  EXPECT_EQ(p.n_blocks, 5u);
  EXPECT_EQ(p.n_trunk, 4u);
  EXPECT_EQ(p.n_gdn, 3u);
  EXPECT_EQ(p.n_attn, 1u);
  EXPECT_EQ(p.ple_block, 1);
  EXPECT_EQ(p.mtp_block, 4);
  EXPECT_EQ(p.blocks[3].mixer, Mixer::Attention);
  EXPECT_EQ(p.blocks[3].slot, 0);
  EXPECT_EQ(p.blocks[2].mixer, Mixer::Gdn);
  EXPECT_EQ(p.blocks[2].slot, 2);
  EXPECT_TRUE(p.blocks[4].mtp);
  EXPECT_EQ(p.blocks[4].mixer, Mixer::Attention);
  EXPECT_EQ(p.blocks[4].compress_ratio, 4u);  // the MTP attention gets the trunk's ratio
}

TEST(ModelConfig, MissingKey) {
  gguf::Metadata md = tiny_md();
  md.erase("qwen4exp.expert_count");
  expect_error(md, "qwen4exp: expected qwen4exp.expert_count=<u32>, got <missing> in tiny.gguf");
}

TEST(ModelConfig, WrongType) {
  gguf::Metadata md = tiny_md();
  md.set("qwen4exp.block_count", int32_t{5});
  expect_error(md, "qwen4exp: expected qwen4exp.block_count=<u32>, got <i32> in tiny.gguf");
  md = tiny_md();
  md.set("qwen4exp.attention.layer_norm_rms_epsilon", 1e-6);
  expect_error(md, "qwen4exp: expected qwen4exp.attention.layer_norm_rms_epsilon=<f32>, got <f64> in tiny.gguf");
}

TEST(ModelConfig, WrongArchitecture) {
  gguf::Metadata md = tiny_md();
  md.set("general.architecture", "qwen35moe");
  expect_error(md, "qwen4exp: expected general.architecture=qwen4exp, got qwen35moe in tiny.gguf");
}

TEST(ModelConfig, HeadCountsThatDoNotDivide) {
  gguf::Metadata md = tiny_md();
  md.set("qwen4exp.attention.head_count", uint32_t{5});
  expect_error(md, "qwen4exp: expected qwen4exp.attention.head_count=a positive multiple of head_count_kv (2), got 5 in tiny.gguf");
  md = tiny_md();
  md.set("qwen4exp.ssm.time_step_rank", uint32_t{3});
  expect_error(md, "qwen4exp: expected qwen4exp.ssm.time_step_rank=a positive multiple of ssm.group_count (2), got 3 in tiny.gguf");
  md = tiny_md();
  md.set("qwen4exp.ssm.inner_size", uint32_t{30});
  expect_error(md, "qwen4exp: expected qwen4exp.ssm.inner_size=32 (time_step_rank * state_size), got 30 in tiny.gguf");
}

TEST(ModelConfig, CompressRatiosAllZero) {
  gguf::Metadata md = tiny_md();
  md.set("qwen4exp.attention.compress_ratios", gguf::Value::array<int32_t>({0, 0, 0, 0, 0}));
  expect_error(md, "qwen4exp: expected qwen4exp.attention.compress_ratios=a ratio > 0 for attention block 3 (indexer keys "
                   "are present), got [0,0,0,0,0] in tiny.gguf");
  md.erase("qwen4exp.attention.compress_ratios");
  expect_error(md, "qwen4exp: expected qwen4exp.attention.compress_ratios=a ratio > 0 for attention block 3 (indexer keys "
                   "are present), got [] in tiny.gguf");
}

TEST(ModelConfig, CompressRatioOnAGdnBlockOrWrongLength) {
  gguf::Metadata md = tiny_md();
  md.set("qwen4exp.attention.compress_ratios", gguf::Value::array<int32_t>({4, 0, 0, 4, 0}));
  expect_error(md, "qwen4exp: expected qwen4exp.attention.compress_ratios=0 for GDN block 0, got [4,0,0,4,0] in tiny.gguf");
  md.set("qwen4exp.attention.compress_ratios", gguf::Value::array<int32_t>({0, 0, 0, 4}));
  expect_error(md, "qwen4exp: expected qwen4exp.attention.compress_ratios=5 entries (block_count), got 4 entries in tiny.gguf");
}

TEST(ModelConfig, PleLayerMustBeGdn) {
  gguf::Metadata md = tiny_md();
  md.set("qwen4exp.ple.layers", gguf::Value::array<int32_t>({3}));
  expect_error(md, "qwen4exp: expected qwen4exp.ple.layers=a GDN block, got [3] (block 3 is full attention) in tiny.gguf");
  md.set("qwen4exp.ple.layers", gguf::Value::array<int32_t>({1, 2}));
  expect_error(md, "qwen4exp: expected qwen4exp.ple.layers=at most one PLE layer, got [1,2] in tiny.gguf");
}

TEST(ModelConfig, PleArrays) {
  gguf::Metadata md = tiny_md();
  md.set("qwen4exp.ple.layer_multipliers", gguf::Value::array<float>({1.0f, 2.0f, 3.0f}));
  expect_error(md, "qwen4exp: expected qwen4exp.ple.layer_multipliers=<arr[u64]>, got <arr[f32]> in tiny.gguf");
  md = tiny_md();
  md.set("qwen4exp.ple.head_offsets", gguf::Value::array<uint64_t>({0, 1, 2}));
  expect_error(md, "qwen4exp: expected qwen4exp.ple.head_offsets=4 entries ((ngram_size - 1) * heads_per_ngram), got 3 "
                   "entries in tiny.gguf");
  md = tiny_md();
  md.set("qwen4exp.ple.layer_multipliers", gguf::Value::array<uint64_t>({1, 3}));
  expect_error(md, "qwen4exp: expected qwen4exp.ple.layer_multipliers=>= 3 entries (ngram_size), got 2 entries in tiny.gguf");
}

TEST(ModelConfig, OptionalPartsAbsent) {
  testing::TinySpec spec;
  spec.ple = false;
  spec.qsa = false;
  spec.mtp = false;
  auto c = load_config(tiny_md(spec), "tiny.gguf");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_FALSE(c->has_ple);
  EXPECT_FALSE(c->qsa);
  EXPECT_FALSE(c->plan.has_mtp());
  EXPECT_EQ(c->plan.blocks[3].compress_ratio, 0u);
}

TEST(ModelConfig, MiscChecks) {
  gguf::Metadata md = tiny_md();
  md.set("qwen4exp.hyper_connection.count", uint32_t{1});
  expect_error(md, "qwen4exp: expected qwen4exp.hyper_connection.count=> 1, got 1 in tiny.gguf");
  md = tiny_md();
  md.set("qwen4exp.nextn_predict_layers", uint32_t{2});
  expect_error(md, "qwen4exp: expected qwen4exp.nextn_predict_layers=0 or 1, got 2 in tiny.gguf");
  md = tiny_md();
  md.set("qwen4exp.rope.dimension_count", uint32_t{7});
  expect_error(md, "qwen4exp: expected qwen4exp.rope.dimension_count=an even value in [2, 16], got 7 in tiny.gguf");
  md = tiny_md();
  md.set("qwen4exp.attention.indexer.top_k", uint32_t{10});
  expect_error(md, "qwen4exp: expected qwen4exp.attention.indexer.top_k=a multiple of the compress ratio (4), got 10 in tiny.gguf");
  md = tiny_md();
  md.set("qwen4exp.expert_used_count", uint32_t{9});
  expect_error(md, "qwen4exp: expected qwen4exp.expert_used_count=in [1, 8], got 9 in tiny.gguf");
}

TEST(ModelConfig, RecurrentLayersOverrideTheInterval) {
  gguf::Metadata md = tiny_md();
  md.set("qwen4exp.attention.recurrent_layers", gguf::Value::array<bool>({true, true, false, true, false}));
  md.set("qwen4exp.attention.compress_ratios", gguf::Value::array<int32_t>({0, 0, 4, 0, 0}));
  auto c = load_config(md, "tiny.gguf");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->plan.blocks[2].mixer, Mixer::Attention);
  EXPECT_EQ(c->plan.blocks[3].mixer, Mixer::Gdn);
  EXPECT_EQ(c->plan.n_gdn, 3u);
}

TEST(ModelConfig, PerBlockExpertWidths) {
  gguf::Metadata md = tiny_md();
  md.set("qwen4exp.expert_feed_forward_length", gguf::Value::array<uint32_t>({16, 16, 32, 16, 16}));
  auto c = load_config(md, "tiny.gguf");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->n_ff_exp[2], 32u);
}

// ---- Weights binding ---------------------------------------------------------------------

struct Bound {
  Status status;
  std::unique_ptr<gguf::Model> file;
  model::ModelConfig config;
  model::Weights weights;
};

Bound bind_tiny(testing::TinyWriter& w, const std::string& name) {
  Bound b;
  const std::string path = testing::temp_path(name);
  b.status = w.write(path);
  if (!b.status.ok()) return b;
  auto file = gguf::Model::open(path);
  std::remove(path.c_str());
  if (!file) {
    b.status = file.status();
    return b;
  }
  b.file = std::make_unique<gguf::Model>(std::move(file.value()));
  auto config = load_config(b.file->metadata(), "tiny.gguf");
  if (!config) {
    b.status = config.status();
    return b;
  }
  b.config = std::move(config.value());
  auto weights = model::bind_weights(*b.file, b.config);
  if (!weights) {
    b.status = weights.status();
    return b;
  }
  b.weights = std::move(weights.value());
  return b;
}

TEST(Weights, BindsEveryTensorByName) {
  testing::TinySpec spec;
  testing::TinyWriter w(spec);
  w.add_all();
  Bound b = bind_tiny(w, "bind_ok.gguf");
  ASSERT_TRUE(b.status.ok()) << b.status.message();
  EXPECT_EQ(b.config.n_vocab, spec.vocab);
  const model::Block& attn = b.weights.blocks[3];
  EXPECT_EQ(*attn.attn_q.name, "blk.3.attn_q.weight");
  EXPECT_EQ(*attn.indexer_k_norm.name, "blk.3.indexer.k_norm.weight");
  EXPECT_TRUE(attn.has_indexer());
  EXPECT_EQ(*b.weights.blocks[0].ssm_dt_bias.name, "blk.0.ssm_dt.bias");
  EXPECT_EQ(*b.weights.blocks[1].ple_conv1d.name, "blk.1.ple_conv1d.weight");
  EXPECT_EQ(*b.weights.blocks[4].nextn_eh_proj.name, "blk.4.nextn.eh_proj.weight");
  EXPECT_FALSE(b.weights.blocks[0].attn_q);
  EXPECT_EQ(b.weights.blocks[2].expert_up(3).tensor, &b.weights.blocks[2].ffn_up_exps);
  EXPECT_EQ(b.weights.blocks[2].expert_up(3).first_row, 3 * 16);
  EXPECT_EQ(b.weights.blocks[2].expert_down(3).first_row, 3 * 32);
  EXPECT_NE(b.weights.blocks[0].hc_attn_norm.f32, nullptr);
}

TEST(Weights, FusedGateUpExperts) {
  testing::TinySpec spec;
  spec.fused_experts = true;
  testing::TinyWriter w(spec);
  w.add_all();
  Bound b = bind_tiny(w, "bind_fused.gguf");
  ASSERT_TRUE(b.status.ok()) << b.status.message();
  const model::Block& blk = b.weights.blocks[0];
  EXPECT_EQ(blk.expert_gate(2).tensor, &blk.ffn_gate_up_exps);
  EXPECT_EQ(blk.expert_gate(2).first_row, 2 * 32);
  EXPECT_EQ(blk.expert_up(2).first_row, 2 * 32 + 16);
}

TEST(Weights, SmallTensorsOfOtherTypesAreDequantized) {
  testing::TinySpec spec;
  spec.quantized = true;
  testing::TinyWriter w(spec);
  w.add_all();
  Bound b = bind_tiny(w, "bind_q.gguf");
  ASSERT_TRUE(b.status.ok()) << b.status.message();
  EXPECT_EQ(b.weights.blocks[0].ssm_conv1d.type, quant::Type::F16);
  EXPECT_NE(b.weights.blocks[0].ssm_conv1d.f32, nullptr);
  EXPECT_EQ(b.weights.blocks[0].attn_qkv.type, quant::Type::Q8_0);
  EXPECT_EQ(b.weights.blocks[0].attn_qkv.f32, nullptr);
}

TEST(Weights, WideNormsAcceptedAsHByS) {
  testing::TinySpec spec;
  testing::TinyWriter w(spec);
  w.reshape["blk.0.hc_attn_norm.weight"] = {32, 4};
  w.add_all();
  Bound b = bind_tiny(w, "bind_norm.gguf");
  ASSERT_TRUE(b.status.ok()) << b.status.message();
  EXPECT_EQ(b.weights.blocks[0].hc_attn_norm.ne[0], 128);
}

TEST(Weights, MtpAbsent) {
  testing::TinySpec spec;
  spec.mtp = false;
  testing::TinyWriter w(spec);
  w.add_all();
  Bound b = bind_tiny(w, "bind_nomtp.gguf");
  ASSERT_TRUE(b.status.ok()) << b.status.message();
  EXPECT_EQ(b.weights.blocks.size(), 4u);
}

TEST(Weights, MissingTensor) {
  testing::TinyWriter w({});
  w.skip.insert("blk.2.ssm_a");
  w.add_all();
  Bound b = bind_tiny(w, "bind_missing.gguf");
  EXPECT_EQ(b.status.message(), "qwen4exp: expected blk.2.ssm_a ne=[4], got <missing> in tiny.gguf");
}

TEST(Weights, WrongShape) {
  testing::TinyWriter w({});
  w.reshape["blk.3.attn_k.weight"] = {32, 16};
  w.add_all();
  Bound b = bind_tiny(w, "bind_shape.gguf");
  EXPECT_EQ(b.status.message(), "qwen4exp: expected blk.3.attn_k.weight ne=[32,32], got ne=[32,16] in tiny.gguf");
}

TEST(Weights, UnknownTensor) {
  testing::TinyWriter w({});
  w.add_all();
  w.add("blk.0.attn_norm.weight", {32}, testing::Init::Norm);
  Bound b = bind_tiny(w, "bind_extra.gguf");
  EXPECT_EQ(b.status.message(),
            "qwen4exp: expected no tensor blk.0.attn_norm.weight (not part of this model's layout), got one in tiny.gguf");
}

TEST(Weights, FusedAndSplitExpertsTogether) {
  testing::TinyWriter w({});
  w.add_all();
  w.add("blk.0.ffn_gate_up_exps.weight", {32, 32, 8}, testing::Init::Matrix);
  Bound b = bind_tiny(w, "bind_both.gguf");
  EXPECT_EQ(b.status.message(),
            "qwen4exp: expected blk.0.ffn_gate_exps.weight absent (ffn_gate_up_exps is present), got present in tiny.gguf");
}

TEST(Weights, PleTableTooSmall) {
  testing::TinyWriter w({});
  w.reshape["per_layer_token_embd.weight"] = {8, 100};
  w.add_all();
  Bound b = bind_tiny(w, "bind_table.gguf");
  EXPECT_NE(b.status.message().find("per_layer_token_embd.weight ne=[8,>="), std::string::npos) << b.status.message();
}

}  // namespace
}  // namespace strata
