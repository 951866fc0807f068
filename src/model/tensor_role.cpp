// Tensor roles of qwen4exp from GGUF names (spec/gguf-layout.md §3). Matching is on the
// name's stem (the part of "blk.N.<stem>.weight" before the first dot), so "attn_qkv"
// (GDN) can never be mistaken for "attn_q" (attention).
#include "strata/model/tensor_role.h"

#include <charconv>

namespace strata::model {

std::string_view role_name(TensorRole role) {
  switch (role) {
    case TensorRole::RoutedGate: return "routed_gate";
    case TensorRole::RoutedUp: return "routed_up";
    case TensorRole::RoutedGateUp: return "routed_gate_up";
    case TensorRole::RoutedDown: return "routed_down";
    case TensorRole::SharedExpert: return "shared_expert";
    case TensorRole::Router: return "router";
    case TensorRole::Attention: return "attention";
    case TensorRole::Gdn: return "gdn";
    case TensorRole::HyperConnection: return "hyper_connection";
    case TensorRole::NgramTable: return "ngram_table";
    case TensorRole::PleLayer: return "ple_layer";
    case TensorRole::Embedding: return "embedding";
    case TensorRole::Head: return "head";
    case TensorRole::Mtp: return "mtp";
    case TensorRole::Other: return "other";
  }
  return "other";
}

namespace {

std::string_view stem_of(std::string_view rest) { return rest.substr(0, rest.find('.')); }

TensorRole classify_global(std::string_view name) {
  std::string_view stem = stem_of(name);
  if (stem == "token_embd") return TensorRole::Embedding;
  if (stem == "output") return TensorRole::Head;
  if (stem == "per_layer_token_embd") return TensorRole::NgramTable;
  if (stem.starts_with("output_hc_")) return TensorRole::HyperConnection;
  if (stem == "nextn") return TensorRole::Mtp;
  return TensorRole::Other;
}

TensorRole classify_layer(std::string_view rest) {
  std::string_view stem = stem_of(rest);
  if (stem == "nextn") return TensorRole::Mtp;
  if (stem == "ffn_gate_exps") return TensorRole::RoutedGate;
  if (stem == "ffn_up_exps") return TensorRole::RoutedUp;
  if (stem == "ffn_gate_up_exps") return TensorRole::RoutedGateUp;
  if (stem == "ffn_down_exps") return TensorRole::RoutedDown;
  if (stem.ends_with("_shexp")) return TensorRole::SharedExpert;  // includes ffn_gate_inp_shexp
  if (stem == "ffn_gate_inp") return TensorRole::Router;
  if (stem == "attn_qkv" || stem == "attn_gate" || stem.starts_with("ssm_")) return TensorRole::Gdn;
  if (stem == "attn_q" || stem == "attn_k" || stem == "attn_v" || stem == "attn_output" || stem == "attn_q_norm" ||
      stem == "attn_k_norm" || stem == "indexer") {
    return TensorRole::Attention;
  }
  if (stem.starts_with("hc_")) return TensorRole::HyperConnection;
  if (stem.starts_with("ple_")) return TensorRole::PleLayer;
  return TensorRole::Other;
}

}  // namespace

TensorRole classify_tensor(std::string_view name, uint32_t block_count, uint32_t nextn_layers) {
  constexpr std::string_view kBlk = "blk.";
  if (!name.starts_with(kBlk)) return classify_global(name);
  std::string_view after = name.substr(kBlk.size());
  uint32_t layer = 0;
  auto [end, ec] = std::from_chars(after.data(), after.data() + after.size(), layer);
  if (ec != std::errc() || end == after.data() + after.size() || *end != '.') return TensorRole::Other;
  // The MTP block is trunk-shaped (attention, MoE, HC), so it is recognised by its index.
  if (nextn_layers > 0 && nextn_layers <= block_count && layer >= block_count - nextn_layers) {
    return TensorRole::Mtp;
  }
  return classify_layer(std::string_view(end + 1, after.data() + after.size() - (end + 1)));
}

}  // namespace strata::model
