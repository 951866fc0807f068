// ModelConfig: every qwen4exp metadata key of spec/gguf-layout.md §2, read and validated once
// at load (STYLE habit 4). Tiny test files differ from the released geometry, so nothing is
// hard-coded: the values come from the file and are checked for consistency (head counts
// that divide, widths that agree, a PLE block that is a GDN block, QSA ratios that are set).
// Every failure reads "qwen4exp: expected <key>=<..>, got <..> in <file>".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/gguf/gguf.h"
#include "strata/model/layer_plan.h"

namespace strata::model {

struct PleConfig {
  uint32_t ngram_size = 0;        // ple.ngram_size (3: bigram + trigram)
  uint32_t heads_per_ngram = 0;   // ple.heads_per_ngram
  uint32_t n_heads = 0;           // (ngram_size - 1) * heads_per_ngram
  uint32_t row_dim = 0;           // embedding_length_per_layer_input (one table row)
  uint32_t conv_kernel = 0;       // ple.conv_kernel; the conv dilation is ngram_size
  uint32_t eos_token_id = 0;      // ple.eos_token_id: the only token that cuts the n-gram window
  uint32_t image_token_id = 0;    // ple.image_token_id, else eos
  std::vector<uint64_t> multipliers;   // ple.layer_multipliers [>= ngram_size]
  std::vector<uint64_t> head_offsets;  // ple.head_offsets [n_heads]
  std::vector<uint64_t> head_sizes;    // ple.head_vocab_sizes [n_heads] (prime moduli)
  uint32_t embed_dim() const { return n_heads * row_dim; }
  uint32_t history() const { return (conv_kernel - 1) * ngram_size; }  // conv rows kept
};

struct ModelConfig {
  std::string file;               // the path, for messages

  uint32_t n_vocab = 0;           // rows of token_embd (set by bind_weights' caller, see load_config)
  uint32_t n_embd = 0;            // embedding_length, H
  uint32_t context_length = 0;
  float rms_eps = 1e-6f;          // attention.layer_norm_rms_epsilon: every norm and the GDN l2norm

  // Hyper-connections.
  uint32_t hc_count = 0;          // hyper_connection.count, S
  uint32_t hc_rank = 0;           // hyper_connection.low_rank
  uint32_t n_wide() const { return hc_count * n_embd; }

  // Full attention.
  uint32_t n_head = 0, n_head_kv = 0, head_dim = 0;
  float rope_theta = 0.0f;        // rope.freq_base
  uint32_t n_rot = 0;             // rope.dimension_count
  std::array<int32_t, 4> rope_sections{0, 0, 0, 0};

  // QSA indexer (absent: every attention block is dense).
  bool qsa = false;
  uint32_t indexer_n_head = 0, indexer_head_dim = 0, indexer_top_k = 0;
  uint32_t compress_ratio = 0;    // the common non-zero attention.compress_ratios value
  uint32_t indexer_top_blocks() const { return compress_ratio ? indexer_top_k / compress_ratio : 0; }

  // Gated DeltaNet.
  uint32_t ssm_conv_kernel = 0;   // ssm.conv_kernel
  uint32_t ssm_head_dim = 0;      // ssm.state_size (k and v head dim)
  uint32_t ssm_n_k_heads = 0;     // ssm.group_count
  uint32_t ssm_n_v_heads = 0;     // ssm.time_step_rank
  uint32_t ssm_inner = 0;         // ssm.inner_size = n_v_heads * head_dim
  uint32_t ssm_conv_dim() const { return 2 * ssm_n_k_heads * ssm_head_dim + ssm_inner; }

  // MoE.
  uint32_t n_expert = 0, n_expert_used = 0;
  std::vector<uint32_t> n_ff_exp;  // expert_feed_forward_length per block (a scalar key is broadcast)
  uint32_t n_ff_shexp = 0;         // expert_shared_feed_forward_length

  bool has_ple = false;
  PleConfig ple;

  LayerPlan plan;
};

// Reads and validates the metadata of an opened file. `file` names it in messages.
Result<ModelConfig> load_config(const gguf::Metadata& md, const std::string& file);

}  // namespace strata::model
