#include "strata/reference/state.h"

namespace strata::reference {

SequenceState SequenceState::create(const model::ModelConfig& c) {
  SequenceState s;
  s.gdn.resize(c.plan.n_gdn);
  for (GdnState& g : s.gdn) {
    g.conv.assign(static_cast<size_t>(c.ssm_conv_kernel - 1) * c.ssm_conv_dim(), 0.0f);
    g.ssm.assign(static_cast<size_t>(c.ssm_n_v_heads) * c.ssm_head_dim * c.ssm_head_dim, 0.0f);
  }
  s.attn.resize(c.plan.n_attn);
  if (c.has_ple) {
    // Missing history reads as EOS (spec §5.2); the conv history starts at zeros (§5.4 step 6).
    s.ple.context.assign(c.ple.ngram_size - 1, static_cast<int32_t>(c.ple.eos_token_id));
    s.ple.conv.assign(static_cast<size_t>(c.ple.history()) * c.n_wide(), 0.0f);
  }
  return s;
}

}  // namespace strata::reference
