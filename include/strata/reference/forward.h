// The reference forward pass (spec/model.md §2): embedding, the trunk blocks in plan order
// (PLE, hc_attn mix, GDN or QSA attention, combine, hc_ffn mix, MoE, combine), the final
// mixer and the head; and the MTP draft head (§9) on top of the trunk's wide residual.
//
// A call processes n new tokens of one sequence and appends them to its SequenceState, so a
// prompt can be run in one call and then decoded token by token. Prefill + decode equals
// one pass over the whole sequence: bit for bit when GDN runs the same form in both
// (GdnPath::Recurrent), and within fp32 rounding of the chunked-vs-recurrent GDN otherwise
// (bound: 1e-4 x max|logit|, tests/unit/reference/forward_test.cpp; ~1e-6 relative observed
// against transformers).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/common/status.h"
#include "strata/reference/gdn.h"
#include "strata/reference/model.h"
#include "strata/reference/stage.h"
#include "strata/reference/state.h"

namespace strata::reference {

struct ForwardOptions {
  GdnPath gdn = GdnPath::Auto;    // Auto: transformers' rule (see gdn.h)
  const StageSink* sink = nullptr;
};

struct ForwardOutput {
  int64_t n_tok = 0;
  std::vector<float> logits;  // [n_tok, n_vocab]
  std::vector<float> wide;    // [n_tok, S*H]: the residual before the final mixer (the MTP input)
};

// Runs the trunk over `tokens` at positions state.n_past ... Token ids must be < n_vocab.
Result<ForwardOutput> forward(const Model& model, SequenceState& state, std::span<const int32_t> tokens,
                              const ForwardOptions& options = {});

// The MTP head for positions state.mtp.n ...: row t takes the trunk's wide residual at that
// position and the token that follows it, and gives the draft logits for the token after
// that (position + 2). Appends to the MTP cache. ForwardOutput::wide is the MTP block's own
// wide output (the input of a chained draft step).
Result<ForwardOutput> forward_mtp(const Model& model, SequenceState& state, std::span<const float> wide,
                                  std::span<const int32_t> next_tokens, const ForwardOptions& options = {});

}  // namespace strata::reference
