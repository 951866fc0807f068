// The plan alone (nothing written): full-geometry totals against the published sizes, the
// UD-Q4_K_XL layout, slice metadata, the PLE constants and argument errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <string>

#include "strata/model/tokenizer.h"
#include "strata/synth/synth.h"

namespace strata::synth {
namespace {

Plan plan_for(Options o) {
  auto plan = make_plan(o);
  EXPECT_TRUE(plan.ok()) << plan.error();
  return std::move(plan.value());
}

Plan full_plan(Recipe r) {
  Options o;
  o.recipe = r;
  return plan_for(o);
}

double deviation(uint64_t planned, uint64_t published) {
  return static_cast<double>(planned) / static_cast<double>(published) - 1.0;
}

// GSQ-RCO: shard 1 (everything but the table), the routed experts and the table shard
// within 2% of reference-engine.md §5.2; the table shard is exact.
TEST(SynthPlan, GsqFullGeometryMatchesPublishedSizes) {
  for (Recipe r : {Recipe::Q2_0, Recipe::IQ2_XS, Recipe::IQ3_XXS, Recipe::IQ3_S}) {
    SCOPED_TRACE(std::string(recipe_name(r)));
    const Plan plan = full_plan(r);
    const PublishedSizes pub = published_sizes(r);
    ASSERT_EQ(plan.shards.size(), 2u);
    EXPECT_LT(std::fabs(deviation(plan.shards[0].file_bytes, pub.without_table)), 0.02)
        << plan.shards[0].file_bytes << " vs " << pub.without_table;
    EXPECT_LT(std::fabs(deviation(plan.routed_expert_bytes(), pub.routed_experts)), 0.02)
        << plan.routed_expert_bytes() << " vs " << pub.routed_experts;
    EXPECT_EQ(plan.shards[1].file_bytes, 28'800'138'432u);
    EXPECT_EQ(plan.shards[1].n_tensors, 1u);
    EXPECT_EQ(plan.shards[1].hole_bytes, 28'800'138'240u);
    EXPECT_LT(std::fabs(deviation(plan.shards[0].file_bytes + plan.shards[1].file_bytes, pub.all_shards)), 0.02);
    // Everything is written except the table's hole.
    EXPECT_EQ(plan.written_bytes(), plan.total_bytes() - 28'800'138'240u);
  }
}

TEST(SynthPlan, UdQ4KXlMatchesPublishedLayout) {
  const Plan plan = full_plan(Recipe::UD_Q4_K_XL);
  const PublishedSizes pub = published_sizes(Recipe::UD_Q4_K_XL);
  EXPECT_EQ(plan.tensors.size(), 1224u);  // gguf-layout.md §2: split.tensors.count
  ASSERT_EQ(plan.shards.size(), 4u);
  EXPECT_EQ(plan.shards[0].n_tensors, 0u);  // metadata only
  uint64_t all = 0;
  for (const ShardPlan& s : plan.shards) all += s.file_bytes;
  EXPECT_LT(std::fabs(deviation(all, pub.all_shards)), 0.02) << all;
  EXPECT_LT(std::fabs(deviation(plan.routed_expert_bytes(), pub.routed_experts)), 0.02);
  // The table, token_embd, output and output_hc_* sit in shard 2; layers 11 and 41 straddle.
  for (const char* name : {"per_layer_token_embd.weight", "token_embd.weight", "output.weight", "output_hc_up.weight"}) {
    EXPECT_EQ(plan.find(name)->shard, 1u) << name;
  }
  auto shards_of_layer = [&](int layer) {
    std::set<uint32_t> s;
    for (const TensorPlan& t : plan.tensors) {
      if (t.layer == layer) s.insert(t.shard);
    }
    return s.size();
  };
  for (int l = 0; l < 48; ++l) EXPECT_EQ(shards_of_layer(l), l == 11 || l == 41 ? 2u : 1u) << "layer " << l;
  EXPECT_EQ(plan.find("blk.2.ffn_gate_exps.weight")->type, quant::Type::Q5_K);
  EXPECT_EQ(plan.find("blk.3.ffn_gate_exps.weight")->type, quant::Type::Q4_K);
  EXPECT_EQ(plan.find("blk.30.ffn_down_exps.weight")->type, quant::Type::Q8_0);
  EXPECT_EQ(plan.find("blk.31.ffn_down_exps.weight")->type, quant::Type::Q5_1);
  EXPECT_EQ(plan.find("blk.3.indexer.q_proj.weight")->type, quant::Type::BF16);
  EXPECT_EQ(plan.find("blk.0.ffn_gate_inp.weight")->type, quant::Type::F32);
}

TEST(SynthPlan, GsqTypeMix) {
  const Plan plan = full_plan(Recipe::IQ3_XXS);
  EXPECT_EQ(plan.find("blk.5.ffn_gate_exps.weight")->type, quant::Type::IQ3_XXS);
  EXPECT_EQ(plan.find("blk.0.ffn_down_exps.weight")->type, quant::Type::IQ4_NL);
  EXPECT_EQ(plan.find("blk.5.ffn_down_exps.weight")->type, quant::Type::Q2_0);
  EXPECT_EQ(plan.find("blk.0.hc_attn_down.weight")->type, quant::Type::BF16);
  EXPECT_EQ(plan.find("blk.0.ffn_gate_inp.weight")->type, quant::Type::BF16);
  EXPECT_EQ(plan.find("blk.1.ple_key.weight")->type, quant::Type::Q2_0);
  EXPECT_EQ(plan.find("per_layer_token_embd.weight")->type, quant::Type::IQ4_NL);
  EXPECT_EQ(plan.find("output.weight")->type, quant::Type::IQ4_XS);
  // 640-wide rows cannot hold 256-element blocks: llama-quantize's fallback (Q5_K -> Q5_1).
  EXPECT_EQ(plan.find("blk.0.ffn_down_shexp.weight")->type, quant::Type::Q5_1);
  Options f32;
  f32.router_f32 = true;
  EXPECT_EQ(plan_for(f32).find("blk.0.ffn_gate_inp.weight")->type, quant::Type::F32);
  int iq4nl = 0;
  for (const TensorPlan& t : full_plan(Recipe::IQ3_S).tensors) {
    iq4nl += t.role == Role::RoutedDown && t.type == quant::Type::IQ4_NL;
  }
  EXPECT_EQ(iq4nl, 19);
}

TEST(SynthPlan, SliceMetadataIsConsistent) {
  Options o;
  o.layers = 6;
  o.experts = 16;
  o.mtp = true;
  const Plan plan = plan_for(o);
  const gguf::Metadata& md = plan.metadata;
  EXPECT_EQ(*md.get_u32("qwen4exp.block_count"), 7u);
  EXPECT_EQ(*md.get_u32("qwen4exp.nextn_predict_layers"), 1u);
  EXPECT_EQ(*md.get_u32("qwen4exp.expert_count"), 16u);
  EXPECT_EQ(*md.get_u32("qwen4exp.expert_used_count"), 10u);
  EXPECT_EQ(*md.get_int_array("qwen4exp.attention.compress_ratios"), (std::vector<int64_t>{0, 0, 0, 4, 0, 0, 0}));
  EXPECT_EQ(*md.get_int_array("qwen4exp.ple.layers"), (std::vector<int64_t>{1}));
  EXPECT_EQ(plan.find("blk.3.ffn_gate_exps.weight")->ne, (std::vector<int64_t>{2560, 640, 16}));
  EXPECT_NE(plan.find("blk.3.attn_q.weight"), nullptr);
  EXPECT_NE(plan.find("blk.4.attn_qkv.weight"), nullptr);
  EXPECT_NE(plan.find("blk.6.nextn.eh_proj.weight"), nullptr);
  EXPECT_NE(plan.find("blk.6.attn_q.weight"), nullptr);
  EXPECT_EQ(plan.find("blk.6.ffn_gate_exps.weight")->role, Role::Mtp);
  EXPECT_EQ(plan.find("blk.7.attn_q.weight"), nullptr);

  // One layer: no PLE block, so no table and a single shard.
  o.layers = 1;
  o.mtp = false;
  const Plan one = plan_for(o);
  EXPECT_EQ(one.shards.size(), 1u);
  EXPECT_EQ(one.find("per_layer_token_embd.weight"), nullptr);
  EXPECT_TRUE(one.metadata.get_int_array("qwen4exp.ple.layers")->empty());
}

// spec/model.md Appendix A: moduli, offsets, table rows and multipliers derived from the seed.
TEST(SynthPlan, PleConstantsMatchTheReleasedModel) {
  const Plan plan = full_plan(Recipe::Q2_0);
  const auto sizes = *plan.metadata.get_u64_array("qwen4exp.ple.head_vocab_sizes");
  const auto offsets = *plan.metadata.get_u64_array("qwen4exp.ple.head_offsets");
  ASSERT_EQ(sizes.size(), 16u);
  EXPECT_EQ(sizes[0], 20'000'003u);
  EXPECT_EQ(sizes[7], 20'000'077u);
  EXPECT_EQ(sizes[15], 20'000'171u);
  EXPECT_EQ(offsets[15], 300'001'275u);
  EXPECT_EQ(*plan.metadata.get_u64_array("qwen4exp.ple.layer_multipliers"),
            (std::vector<uint64_t>{23703573157769u, 20109073645365u, 8052911324071u}));
  EXPECT_EQ(plan.find("per_layer_token_embd.weight")->ne, (std::vector<int64_t>{160, 320'001'536}));
}

// The synthetic byte-level vocabulary loads in the engine's tokenizer and round-trips text;
// the chat and stop tokens sit at their Qwen ids.
TEST(SynthPlan, TokenizerRoundTrips) {
  Options o;
  o.layers = 2;
  o.experts = 10;
  const Plan plan = plan_for(o);
  auto tok = model::Tokenizer::from_gguf(plan.metadata);
  ASSERT_TRUE(tok.ok()) << tok.error();
  EXPECT_EQ(tok->vocab_size(), 248320u);
  const std::string text = "Hello, w\xc3\xb6rld!\n  <|im_start|>";
  const auto ids = tok->encode(text);
  EXPECT_EQ(ids.back(), 248045);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_TRUE(tok->is_eog(248046));
}

TEST(SynthPlan, BadArgumentsGiveClearErrors) {
  EXPECT_FALSE(recipe_from_name("q3_k_m").has_value());
  EXPECT_EQ(recipe_from_name("IQ3_XXS"), Recipe::IQ3_XXS);
  Options o;
  o.layers = 0;
  auto r = make_plan(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("--layers must be between 1 and 48 (got 0)"), std::string::npos) << r.error();
  o.layers = 49;
  EXPECT_FALSE(make_plan(o).ok());
  o.layers = 4;
  o.experts = 8;
  r = make_plan(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("--experts must be between 10"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("got 8"), std::string::npos);
  o.experts = 16;
  o.routing_skew = 0.3;
  r = make_plan(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("--routing-skew"), std::string::npos) << r.error();
}

TEST(SynthPlan, DryRunJsonHasEveryTensorAndTotals) {
  const Plan plan = full_plan(Recipe::IQ2_XS);
  const auto j = nlohmann::json::parse(plan_json(plan));
  EXPECT_EQ(j["tensors"].size(), plan.tensors.size());
  EXPECT_EQ(j["tensors"][0]["name"], plan.tensors[0].name);
  EXPECT_EQ(j["totals"]["by_role"]["routed_experts"].get<uint64_t>(), plan.routed_expert_bytes());
  EXPECT_EQ(j["totals"]["by_shard"].size(), 2u);
  EXPECT_LT(std::fabs(j["published"]["without_table"]["deviation"].get<double>()), 0.02);
  EXPECT_EQ(j["published"]["table_shard"]["deviation"].get<double>(), 0.0);
}

}  // namespace
}  // namespace strata::synth
