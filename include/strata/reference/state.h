// Per-sequence state of the reference forward (spec/model.md §10), one object per timeline.
// Slots follow the LayerPlan: gdn[slot] for GDN blocks, attn[slot] for trunk attention
// blocks, `mtp` for the MTP block's own cache. Everything is fp32.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/model/config.h"

namespace strata::reference {

struct GdnState {
  std::vector<float> conv;   // (conv_kernel - 1) rows x conv_dim: the last pre-conv projections, oldest first
  std::vector<float> ssm;    // n_v_heads x head_dim(k) x head_dim(v): the recurrent matrix M of every value head
  // transformers' has_previous_state: a single token with state takes the recurrent path,
  // a single token without state takes the chunked path (spec errata 4).
  bool has_state = false;
};

struct AttnCache {
  int64_t n = 0;                // tokens cached (positions 0..n-1)
  std::vector<float> k, v;      // [n, n_head_kv * head_dim]: keys after q/k norm and RoPE; values
  std::vector<float> index_k;   // [n, indexer_head_dim]: raw index keys (no norm, no RoPE), spec §12.11
  // [n / ratio, indexer_head_dim]: pooled, k_norm'ed, roped key of every complete block. A pure
  // function of its raw keys and first position, so caching it is exact (spec §7.2).
  std::vector<float> block_k;
};

struct PleState {
  std::vector<int32_t> context;  // the last ngram_size-1 raw ids, oldest first; starts as EOS
  std::vector<float> conv;       // the last (conv_kernel-1)*ngram_size rows of norm_conv output; starts at 0
};

struct SequenceState {
  int64_t n_past = 0;            // trunk tokens processed (the next token's position)
  std::vector<GdnState> gdn;
  std::vector<AttnCache> attn;
  PleState ple;
  AttnCache mtp;                 // MTP slot t: K/V from (wide residual at t, token t+1) at RoPE position t

  static SequenceState create(const model::ModelConfig& config);
};

}  // namespace strata::reference
