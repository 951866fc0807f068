// Internal: one block of the model (trunk or MTP) and the mixer + head, shared by forward.cpp
// and mtp.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/reference/forward.h"
#include "strata/reference/hc.h"

namespace strata::reference::detail {

// Runs block b over n_tok rows of the wide residual x in place:
// [ple] hc_attn_mix -> gdn | qsa -> hc_attn_combine -> hc_ffn_mix -> moe -> hc_ffn_combine.
// `attn` is the attention cache to use (the trunk slot or the MTP cache).
void run_block(const Model& model, int b, SequenceState& state, AttnCache* attn, std::span<const int32_t> tokens,
               std::vector<float>& x, int64_t n_tok, int64_t pos0, const ForwardOptions& options);

// A final mixer (HC mix without injection) then the output head: logits [n_tok, n_vocab].
std::vector<float> mix_and_head(const Model& model, const HcWeights& mixer, const std::vector<float>& x, int64_t n_tok,
                                int64_t pos0, const char* mix_stage, const char* head_stage, int block,
                                const ForwardOptions& options);

// Every id in [0, n_vocab), and at least one.
Status check_tokens(const model::ModelConfig& c, std::span<const int32_t> tokens);

}  // namespace strata::reference::detail
