// Weights: every tensor of a qwen4exp file bound once, by name, with its type and shape
// checked against the ModelConfig (STYLE habit 4). Field names equal the GGUF names minus
// the `blk.N.` prefix and the `.weight` suffix, with dots turned into underscores
// (`blk.3.indexer.q_proj.weight` -> blocks[3].indexer_q_proj, `blk.0.ssm_dt.bias` ->
// blocks[0].ssm_dt_bias, `blk.48.nextn.eh_proj.weight` -> blocks[48].nextn_eh_proj).
// After bind_weights nothing looks a tensor up by string.
//
// Layout transforms are the converter's (spec/gguf-layout.md §3) and are NOT undone here:
// norm weights already hold the +1, ssm_a holds A = -exp(A_log), GDN value heads are in
// the tiled order (value head j uses key head j mod n_k_heads), the indexer projection is
// split into indexer.q_proj / k_proj. Expert gate/up come either split (ffn_gate_exps +
// ffn_up_exps) or fused (ffn_gate_up_exps: per expert the first n_ff rows are gate, the next
// n_ff rows up); the accessors below hide which.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/gguf/gguf.h"
#include "strata/model/config.h"
#include "strata/quant/types.h"

namespace strata::model {

// A view of one bound tensor (ggml ne order: ne[0] is the row length). Absent optional
// tensors have data == nullptr.
struct Tensor {
  const std::string* name = nullptr;  // the GGUF name (owned by the gguf::Model)
  quant::Type type = quant::Type::F32;
  std::array<int64_t, 4> ne{0, 1, 1, 1};
  const uint8_t* data = nullptr;      // zero-copy view into the mapped file
  uint64_t row_bytes = 0;             // bytes of one ne[0]-long row
  // The whole tensor as fp32, when available without a per-use conversion: the mapped data
  // itself for F32 tensors, or a dequantized copy owned by Weights for the small vectors
  // (norms, conv kernels, ssm_a, ssm_dt, shared-expert gate) of any type.
  const float* f32 = nullptr;

  explicit operator bool() const { return data != nullptr; }
  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }   // 3-D expert tensors: expert-major
  int64_t n_elements() const { return ne[0] * rows(); }
  const uint8_t* row(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes; }
};

// A row range of a tensor: one expert's gate, up or down matrix, or a whole 2-D weight.
struct MatrixRows {
  const Tensor* tensor = nullptr;
  int64_t first_row = 0;
  int64_t n_rows = 0;
};

struct Block {
  // Hyper-connections (every block).
  Tensor hc_attn_norm, hc_attn_down, hc_attn_up, hc_attn_inject;
  Tensor hc_ffn_norm, hc_ffn_down, hc_ffn_up, hc_ffn_inject;
  // Gated DeltaNet.
  Tensor attn_qkv, attn_gate, ssm_conv1d, ssm_dt_bias, ssm_a, ssm_alpha, ssm_beta, ssm_norm, ssm_out;
  // Full attention and its QSA indexer.
  Tensor attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm;
  Tensor indexer_q_proj, indexer_k_proj, indexer_q_norm, indexer_k_norm;
  // MoE (every block): router, routed experts (split or fused gate/up), shared expert.
  Tensor ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_gate_up_exps, ffn_down_exps;
  Tensor ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp, ffn_gate_inp_shexp;
  // PLE injection (the PLE block only).
  Tensor ple_key, ple_value, ple_norm_key, ple_norm_query, ple_norm_conv, ple_conv1d;
  // MTP head (the MTP block only).
  Tensor nextn_eh_proj, nextn_enorm, nextn_hnorm, nextn_hc_head_norm, nextn_hc_head_down, nextn_hc_head_up;

  int64_t n_ff_exp = 0;  // expert width of this block
  bool has_indexer() const { return static_cast<bool>(indexer_q_proj); }
  // Expert e's gate / up / down matrices as row ranges ([n_ff, H], [n_ff, H], [H, n_ff]).
  MatrixRows expert_gate(int64_t e) const;
  MatrixRows expert_up(int64_t e) const;
  MatrixRows expert_down(int64_t e) const;
};

struct Weights {
  Tensor token_embd;          // [H, n_vocab]
  Tensor output;              // [H, n_vocab]; a copy of token_embd's view when the file has no output
  Tensor output_hc_norm, output_hc_down, output_hc_up;  // the final mixer
  Tensor per_layer_token_embd;  // the PLE n-gram table [row_dim, rows], when the file has PLE
  std::vector<Block> blocks;    // one per plan block, MTP block included

  // Storage of the dequantized small-tensor copies that Tensor::f32 points into.
  std::vector<std::unique_ptr<std::vector<float>>> owned_f32;
};

// Binds and validates every tensor of `file` against `config`. Sets config.n_vocab from
// token_embd (checking qwen4exp.vocab_size when the key is present). Rejects unknown tensor
// names, missing required tensors, wrong shapes and types without a dequantizer, each with a
// message of the form "qwen4exp: expected <tensor> <what>, got <what> in <file>".
// `file` must outlive the Weights (the views point into its mapping).
Result<Weights> bind_weights(const gguf::Model& file, ModelConfig& config);

}  // namespace strata::model
