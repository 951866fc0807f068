// The MTP draft head (spec/model.md §9), following SGLang's Qwen4ExpForCausalLMMTP
// (_fuse_residual_linear_shared), the Qwen-contributed reference — transformers drops mtp.*.
//   e   = fc_embedding . RMSNorm(embed(x_{t+1}); enorm)              [H]
//   Xn  = RMSNorm(X_t; hnorm) with ONE statistic over all S*H values (SGLang/vLLM;
//         llama.cpp's port normalises per stream — a known divergence, spec §12.19)
//   Z_s = e + fc_hidden . Xn_s                                        [S, H]
//   Z'  = the MTP block (hc_attn -> QSA attention on the MTP cache -> combine -> hc_ffn ->
//         MoE -> combine), logits = output . HcMix(Z'; nextn.hc_head_*).
// The GGUF fuses fc_embedding and fc_hidden into nextn.eh_proj [2H -> H] (embedding half
// first); the two halves are applied separately and added, as SGLang does.
#include <fmt/format.h>

#include "block.h"
#include "strata/reference/matmul.h"
#include "strata/reference/ops.h"

namespace strata::reference {

Result<ForwardOutput> forward_mtp(const Model& model, SequenceState& state, std::span<const float> wide,
                                  std::span<const int32_t> next_tokens, const ForwardOptions& options) {
  const model::ModelConfig& c = model.config();
  if (!c.plan.has_mtp()) return Status::error(fmt::format("reference: forward_mtp: {} has no MTP block", c.file));
  STRATA_TRY(detail::check_tokens(c, next_tokens));
  const int64_t n_tok = static_cast<int64_t>(next_tokens.size()), h = c.n_embd, s = c.hc_count, w = c.n_wide();
  if (static_cast<int64_t>(wide.size()) != n_tok * w) {
    return Status::error(fmt::format("reference: forward_mtp: expected {} wide rows of {}, got {} values", n_tok, w,
                                     wide.size()));
  }
  const int b = c.plan.mtp_block;
  const model::Block& blk = model.weights().blocks[b];
  const int64_t pos0 = state.mtp.n;

  // Rows of the eh_proj input: per token, [e_norm | 0] then [0 | Xn_s] for each stream.
  const int64_t rows_per_tok = s + 1;
  std::vector<float> in(n_tok * rows_per_tok * 2 * h, 0.0f);
  std::vector<float> emb(h), xn(w);
  for (int64_t t = 0; t < n_tok; ++t) {
    float* base = in.data() + t * rows_per_tok * 2 * h;
    tensor_row(model.weights().token_embd, next_tokens[t], emb.data());
    rms_norm(emb, f32_span(blk.nextn_enorm), c.rms_eps, {base, static_cast<size_t>(h)});
    rms_norm(wide.subspan(t * w, w), f32_span(blk.nextn_hnorm), c.rms_eps, xn);
    for (int64_t k = 0; k < s; ++k) std::copy_n(xn.data() + k * h, h, base + (k + 1) * 2 * h + h);
  }
  const std::vector<float> proj = matmul(blk.nextn_eh_proj, in, n_tok * rows_per_tok, model.pool());
  std::vector<float> x(n_tok * w);
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* e = proj.data() + t * rows_per_tok * h;
    for (int64_t k = 0; k < s; ++k) {
      const float* hk = e + (k + 1) * h;
      for (int64_t j = 0; j < h; ++j) x[t * w + k * h + j] = e[j] + hk[j];
    }
  }
  emit_stage(options.sink, "mtp_input", b, pos0, n_tok, x);

  detail::run_block(model, b, state, &state.mtp, next_tokens, x, n_tok, pos0, options);

  ForwardOutput out;
  out.n_tok = n_tok;
  out.logits = detail::mix_and_head(model, {&blk.nextn_hc_head_norm, &blk.nextn_hc_head_down, &blk.nextn_hc_head_up, nullptr},
                                    x, n_tok, pos0, "mtp_mix", "mtp_head", b, options);
  out.wide = std::move(x);
  return out;
}

}  // namespace strata::reference
