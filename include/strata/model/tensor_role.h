// What part of qwen4exp a GGUF tensor belongs to, from its name alone (spec/gguf-layout.md §3).
// Used by `strata inspect` for the per-role size summary and by placement code that decides
// what goes to VRAM, RAM or SSD.
#pragma once

#include <cstdint>
#include <string_view>

namespace strata::model {

enum class TensorRole {
  RoutedGate,       // blk.N.ffn_gate_exps
  RoutedUp,         // blk.N.ffn_up_exps
  RoutedGateUp,     // blk.N.ffn_gate_up_exps (fused converter layout)
  RoutedDown,       // blk.N.ffn_down_exps
  SharedExpert,     // blk.N.ffn_{gate,up,down}_shexp, ffn_gate_inp_shexp
  Router,           // blk.N.ffn_gate_inp
  Attention,        // attn_q/k/v/output, attn_q_norm/k_norm, indexer.*
  Gdn,              // attn_qkv, attn_gate, ssm_*
  HyperConnection,  // blk.N.hc_*, output_hc_*
  NgramTable,       // per_layer_token_embd (the 51B n-gram table)
  PleLayer,         // blk.N.ple_*
  Embedding,        // token_embd
  Head,             // output.weight
  Mtp,              // every tensor of the trailing MTP block(s), and nextn.*
  Other,            // anything else (e.g. a stray norm)
};

inline constexpr int kTensorRoleCount = static_cast<int>(TensorRole::Other) + 1;

// Short stable name, e.g. "routed_gate", "shared_expert", "ngram_table", "mtp".
std::string_view role_name(TensorRole role);

// Classifies a tensor name. block_count is qwen4exp.block_count (MTP blocks included) and
// nextn_layers is qwen4exp.nextn_predict_layers (0 when absent): a tensor in blk.N with
// N >= block_count - nextn_layers is MTP, whatever its suffix.
TensorRole classify_tensor(std::string_view name, uint32_t block_count = 0, uint32_t nextn_layers = 0);

}  // namespace strata::model
