// Tensor-name classification for qwen4exp (spec/gguf-layout.md §3).
#include <gtest/gtest.h>

#include "strata/model/tensor_role.h"

namespace strata::model {
namespace {

TEST(TensorRole, ClassifiesEveryQwen4expName) {
  struct Case {
    const char* name;
    TensorRole role;
  };
  const Case cases[] = {
      {"token_embd.weight", TensorRole::Embedding},
      {"output.weight", TensorRole::Head},
      {"per_layer_token_embd.weight", TensorRole::NgramTable},
      {"output_hc_norm.weight", TensorRole::HyperConnection},
      {"output_hc_down.weight", TensorRole::HyperConnection},
      {"output_hc_up.weight", TensorRole::HyperConnection},
      {"blk.0.hc_attn_norm.weight", TensorRole::HyperConnection},
      {"blk.47.hc_ffn_inject.weight", TensorRole::HyperConnection},
      {"blk.0.ffn_gate_inp.weight", TensorRole::Router},
      {"blk.0.ffn_gate_exps.weight", TensorRole::RoutedGate},
      {"blk.0.ffn_up_exps.weight", TensorRole::RoutedUp},
      {"blk.0.ffn_gate_up_exps.weight", TensorRole::RoutedGateUp},
      {"blk.2.ffn_down_exps.weight", TensorRole::RoutedDown},
      {"blk.0.ffn_gate_shexp.weight", TensorRole::SharedExpert},
      {"blk.0.ffn_up_shexp.weight", TensorRole::SharedExpert},
      {"blk.0.ffn_down_shexp.weight", TensorRole::SharedExpert},
      {"blk.0.ffn_gate_inp_shexp.weight", TensorRole::SharedExpert},
      {"blk.3.attn_q.weight", TensorRole::Attention},
      {"blk.3.attn_k.weight", TensorRole::Attention},
      {"blk.3.attn_v.weight", TensorRole::Attention},
      {"blk.3.attn_output.weight", TensorRole::Attention},
      {"blk.3.attn_q_norm.weight", TensorRole::Attention},
      {"blk.3.attn_k_norm.weight", TensorRole::Attention},
      {"blk.3.indexer.q_proj.weight", TensorRole::Attention},
      {"blk.3.indexer.k_norm.weight", TensorRole::Attention},
      {"blk.0.attn_qkv.weight", TensorRole::Gdn},
      {"blk.0.attn_gate.weight", TensorRole::Gdn},
      {"blk.0.ssm_conv1d.weight", TensorRole::Gdn},
      {"blk.0.ssm_dt.bias", TensorRole::Gdn},
      {"blk.0.ssm_a", TensorRole::Gdn},
      {"blk.0.ssm_alpha.weight", TensorRole::Gdn},
      {"blk.0.ssm_beta.weight", TensorRole::Gdn},
      {"blk.0.ssm_norm.weight", TensorRole::Gdn},
      {"blk.0.ssm_out.weight", TensorRole::Gdn},
      {"blk.1.ple_key.weight", TensorRole::PleLayer},
      {"blk.1.ple_norm_conv.weight", TensorRole::PleLayer},
      {"blk.1.ple_conv1d.weight", TensorRole::PleLayer},
      {"blk.48.nextn.eh_proj.weight", TensorRole::Mtp},
      {"output_norm.weight", TensorRole::Other},
      {"blk.x.attn_q.weight", TensorRole::Other},
      {"blk.0", TensorRole::Other},
  };
  for (const Case& c : cases) EXPECT_EQ(classify_tensor(c.name, 49, 1), c.role) << c.name;
}

TEST(TensorRole, MtpBlockByIndex) {
  // block_count 49 with one nextn layer: blk.48 is the MTP block whatever the suffix.
  EXPECT_EQ(classify_tensor("blk.48.attn_q.weight", 49, 1), TensorRole::Mtp);
  EXPECT_EQ(classify_tensor("blk.48.ffn_gate_exps.weight", 49, 1), TensorRole::Mtp);
  EXPECT_EQ(classify_tensor("blk.47.attn_q.weight", 49, 1), TensorRole::Attention);
  // Without nextn_predict_layers, blk.48 is an ordinary block (only nextn.* marks MTP).
  EXPECT_EQ(classify_tensor("blk.48.attn_q.weight", 49, 0), TensorRole::Attention);
  EXPECT_EQ(classify_tensor("blk.48.nextn.enorm.weight", 49, 0), TensorRole::Mtp);
  // Inconsistent metadata does not wrap around.
  EXPECT_EQ(classify_tensor("blk.0.attn_q.weight", 0, 1), TensorRole::Attention);
}

TEST(TensorRole, NamesAreStable) {
  EXPECT_EQ(role_name(TensorRole::RoutedGate), "routed_gate");
  EXPECT_EQ(role_name(TensorRole::NgramTable), "ngram_table");
  EXPECT_EQ(role_name(TensorRole::Mtp), "mtp");
  for (int r = 0; r < kTensorRoleCount; ++r) EXPECT_FALSE(role_name(static_cast<TensorRole>(r)).empty());
}

}  // namespace
}  // namespace strata::model
