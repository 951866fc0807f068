// The trunk forward and the per-block stage sequence (spec/model.md §2, STYLE habit 6).
#include "strata/reference/forward.h"

#include <fmt/format.h>

#include "block.h"
#include "strata/reference/attention.h"
#include "strata/reference/matmul.h"
#include "strata/reference/moe.h"
#include "strata/reference/ple.h"

namespace strata::reference {

namespace detail {

void run_block(const Model& model, int b, SequenceState& state, AttnCache* attn, std::span<const int32_t> tokens,
               std::vector<float>& x, int64_t n_tok, int64_t pos0, const ForwardOptions& options) {
  const model::ModelConfig& c = model.config();
  const model::BlockPlan& plan = c.plan.blocks[b];
  const model::Block& blk = model.weights().blocks[b];
  ThreadPool& pool = model.pool();
  const int64_t s = c.hc_count, h = c.n_embd;

  if (plan.ple) {
    ple_inject(c, blk, model.weights().per_layer_token_embd, state.ple, tokens, x, pool);
    emit_stage(options.sink, "ple", b, pos0, n_tok, x);
  }

  HcMix mix = hc_mix({&blk.hc_attn_norm, &blk.hc_attn_down, &blk.hc_attn_up, &blk.hc_attn_inject}, s, h, c.rms_eps, x,
                     n_tok, pool);
  emit_stage(options.sink, "hc_attn_mix", b, pos0, n_tok, mix.u);
  std::vector<float> y;
  if (plan.mixer == model::Mixer::Gdn) {
    y = gdn_layer(c, blk, state.gdn[plan.slot], mix.u, n_tok, options.gdn, pool);
    emit_stage(options.sink, "gdn", b, pos0, n_tok, y);
  } else {
    y = attention_layer(c, blk, plan.compress_ratio, *attn, mix.u, n_tok, pool);
    emit_stage(options.sink, "qsa", b, pos0, n_tok, y);
  }
  hc_combine(x, y, mix.alpha, s, h, n_tok);
  emit_stage(options.sink, "hc_attn_combine", b, pos0, n_tok, x);

  mix = hc_mix({&blk.hc_ffn_norm, &blk.hc_ffn_down, &blk.hc_ffn_up, &blk.hc_ffn_inject}, s, h, c.rms_eps, x, n_tok, pool);
  emit_stage(options.sink, "hc_ffn_mix", b, pos0, n_tok, mix.u);
  y = moe_layer(blk, c.n_expert_used, mix.u, n_tok, b, pos0, options.sink, pool);
  hc_combine(x, y, mix.alpha, s, h, n_tok);
  emit_stage(options.sink, "hc_ffn_combine", b, pos0, n_tok, x);
}

std::vector<float> mix_and_head(const Model& model, const HcWeights& mixer, const std::vector<float>& x, int64_t n_tok,
                                int64_t pos0, const char* mix_stage, const char* head_stage, int block,
                                const ForwardOptions& options) {
  const model::ModelConfig& c = model.config();
  // No final norm: the mixer's grouped norm is the output norm (spec §2 step 4).
  const HcMix mix = hc_mix(mixer, c.hc_count, c.n_embd, c.rms_eps, x, n_tok, model.pool());
  emit_stage(options.sink, mix_stage, block, pos0, n_tok, mix.u);
  std::vector<float> logits = matmul(model.weights().output, mix.u, n_tok, model.pool());
  emit_stage(options.sink, head_stage, block, pos0, n_tok, logits);
  return logits;
}

Status check_tokens(const model::ModelConfig& c, std::span<const int32_t> tokens) {
  if (tokens.empty()) return Status::error("reference: forward: no tokens");
  for (int32_t id : tokens) {
    if (id < 0 || static_cast<uint32_t>(id) >= c.n_vocab) {
      return Status::error(fmt::format("reference: forward: token id {} out of range (expected 0 <= id < {})", id, c.n_vocab));
    }
  }
  return Status::ok_status();
}

}  // namespace detail

Result<ForwardOutput> forward(const Model& model, SequenceState& state, std::span<const int32_t> tokens,
                              const ForwardOptions& options) {
  const model::ModelConfig& c = model.config();
  const model::Weights& w = model.weights();
  STRATA_TRY(detail::check_tokens(c, tokens));
  const int64_t n_tok = static_cast<int64_t>(tokens.size()), h = c.n_embd, wide = c.n_wide();
  const int64_t pos0 = state.n_past;

  // Embedding, replicated into the S streams of the wide residual (stream-major).
  std::vector<float> x(n_tok * wide);
  for (int64_t t = 0; t < n_tok; ++t) {
    tensor_row(w.token_embd, tokens[t], x.data() + t * wide);
    for (int64_t k = 1; k < c.hc_count; ++k) std::copy_n(x.data() + t * wide, h, x.data() + t * wide + k * h);
  }
  emit_stage(options.sink, "embed", -1, pos0, n_tok, x);

  for (uint32_t b = 0; b < c.plan.n_trunk; ++b) {
    const model::BlockPlan& plan = c.plan.blocks[b];
    AttnCache* attn = plan.mixer == model::Mixer::Attention ? &state.attn[plan.slot] : nullptr;
    detail::run_block(model, static_cast<int>(b), state, attn, tokens, x, n_tok, pos0, options);
  }
  state.n_past += n_tok;

  ForwardOutput out;
  out.n_tok = n_tok;
  out.logits = detail::mix_and_head(model, {&w.output_hc_norm, &w.output_hc_down, &w.output_hc_up, nullptr}, x, n_tok,
                                    pos0, "output_mix", "head", -1, options);
  out.wide = std::move(x);
  return out;
}

}  // namespace strata::reference
