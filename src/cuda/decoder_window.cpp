// The op sequence of one window, in the reference forward's order (src/reference/forward.cpp):
// embed -> broadcast -> per trunk block [PLE] -> HC attn mix -> GDN | attention -> combine ->
// HC ffn mix -> MoE -> combine -> final mixer -> head -> argmax; and the commit sequence that
// keeps the first n rows of a window. Every call here only launches work on the decoder's
// stream (capturable), reading the window's inputs from device memory.
#include <string>

#include "decoder_internal.h"
#include "strata/cuda/get_rows.h"

namespace strata::cuda {
namespace {

// Runs one window's ops for T rows, telling the observer (if any) after each stage.
class WindowRun {
 public:
  WindowRun(Decoder::Impl& m, int T, StageObserver* obs)
      : m_(m), c_(m.config), s_(m.s), st_(m.stream), T_(T), obs_(obs),
        S_(static_cast<int>(c_.hc_count)), H_(static_cast<int>(c_.n_embd)), W_(static_cast<int64_t>(c_.n_wide())) {}

  Status run() {
    STRATA_TRY(embed());
    for (const DevBlock& b : m_.w.blocks) STRATA_TRY(block(b));
    STRATA_TRY(hc_mix(m_.w.output_hc));
    STRATA_TRY(stage("output_mix", -1, s_.u.f32, H_));
    STRATA_TRY(quantize_for(s_.u, {&m_.w.output}));
    STRATA_TRY(op(linear(m_.w.output, s_.u.act(T_), s_.logits, c_.n_vocab, st_)));
    STRATA_TRY(op(argmax_rows(s_.logits, T_, c_.n_vocab, s_.argmax, st_)));
    return stage("head", -1, s_.logits, c_.n_vocab);
  }

 private:
  Status op(const Status& st) {
    ++m_.launches;
    return st;
  }
  Status stage(std::string_view name, int block, const float* dev, int64_t cols) {
    return obs_ ? obs_->stage(name, block, dev, cols, T_) : Status::ok_status();
  }
  // The activation's q8_1 form, once, when any of its consumers takes it.
  Status quantize_for(const ActBuffer& a, std::initializer_list<const DTensor*> consumers) {
    for (const DTensor* w : consumers)
      if (takes_q8(*w)) return op(quantize_act(a.act(T_), st_));
    return Status::ok_status();
  }

  Status embed() {
    GetRowsArgs g;
    g.type = m_.w.token_embd.type;
    g.src = m_.w.token_embd.data;
    g.src_rows = m_.w.token_embd.rows;
    g.cols = H_;
    g.ids = s_.tokens();
    g.n_ids = T_;
    g.dst = s_.embed;
    g.dst_stride = H_;
    STRATA_TRY(op(get_rows(g, st_)));
    STRATA_TRY(op(hc_broadcast(s_.embed, T_, S_, H_, s_.x, st_)));
    return stage("embed", -1, s_.x, W_);
  }

  // HC mix of x into u (and alpha when the site injects), spec §4 steps 1-5.
  Status hc_mix(const HcSite& hc) {
    const float eps = c_.rms_eps;
    const int rank = static_cast<int>(c_.hc_rank);
    STRATA_TRY(op(hc_norm(s_.x, hc.norm, T_, S_, H_, eps, s_.xn.f32, st_)));
    STRATA_TRY(quantize_for(s_.xn, {&hc.down, &hc.inject}));
    STRATA_TRY(op(linear(hc.down, s_.xn.act(T_), s_.d.f32, rank, st_)));
    if (hc.inject) STRATA_TRY(op(linear(hc.inject, s_.xn.act(T_), s_.inject, S_, st_)));
    STRATA_TRY(op(hc_down_act(s_.d.f32, T_, rank, S_, st_)));
    STRATA_TRY(quantize_for(s_.d, {&hc.up}));
    STRATA_TRY(op(linear(hc.up, s_.d.act(T_), s_.g, W_, st_)));
    return op(hc_gate_mean(s_.g, s_.xn.f32, hc.inject ? s_.inject : nullptr, T_, S_, H_, s_.u.f32, s_.alpha, st_));
  }

  Status block(const DevBlock& b) {
    if (b.plan.ple) {
      STRATA_TRY(ple(b));
      STRATA_TRY(stage("ple", b.index, s_.x, W_));
    }
    STRATA_TRY(hc_mix(b.attn_hc));
    STRATA_TRY(stage("hc_attn_mix", b.index, s_.u.f32, H_));
    if (b.plan.mixer == model::Mixer::Gdn) {
      STRATA_TRY(quantize_for(s_.u, {&b.qkv, &b.z_proj, &b.beta, &b.alpha}));
      STRATA_TRY(gdn(b));
      STRATA_TRY(stage("gdn", b.index, s_.y, H_));
    } else {
      STRATA_TRY(quantize_for(s_.u, {&b.q, &b.k, &b.v, &b.iq, &b.ik}));
      STRATA_TRY(attention(b));
      STRATA_TRY(stage("qsa", b.index, s_.y, H_));
    }
    STRATA_TRY(op(hc_combine(s_.x, s_.y, s_.alpha, T_, S_, H_, st_)));
    STRATA_TRY(stage("hc_attn_combine", b.index, s_.x, W_));
    STRATA_TRY(hc_mix(b.ffn_hc));
    STRATA_TRY(stage("hc_ffn_mix", b.index, s_.u.f32, H_));
    STRATA_TRY(moe(b));
    STRATA_TRY(op(hc_combine(s_.x, s_.y, s_.alpha, T_, S_, H_, st_)));
    return stage("hc_ffn_combine", b.index, s_.x, W_);
  }

  // The n-gram rows staged by forward() -> E -> key/value projections -> gated injection.
  Status ple(const DevBlock& b) {
    const int64_t n_heads = c_.ple.n_heads;
    GetRowsArgs g;
    g.type = m_.ple_table->type;
    g.src = s_.ple_rows;
    g.src_rows = T_ * n_heads;
    g.cols = c_.ple.row_dim;
    g.ids = s_.ple_row_ids;
    g.n_ids = T_ * n_heads;
    g.dst = s_.e.f32;  // row t * n_heads + h lands at E[t, h * row_dim]
    g.dst_stride = c_.ple.row_dim;
    STRATA_TRY(op(get_rows(g, st_)));
    STRATA_TRY(quantize_for(s_.e, {&b.ple_key, &b.ple_value}));
    STRATA_TRY(op(linear(b.ple_key, s_.e.act(T_), s_.kp, W_, st_)));
    STRATA_TRY(op(linear(b.ple_value, s_.e.act(T_), s_.vp, H_, st_)));
    return op(ple_inject(m_.ple_dims, s_.kp, s_.vp, b.ple_norm_key, b.ple_norm_query, b.ple_norm_conv, b.ple_conv,
                         m_.ple_hist, s_.x, T_, st_));
  }

  // Gated DeltaNet (spec §6). The conv outputs and b/a rows go to the layer's own buffers, so a
  // commit of fewer rows can replay the recurrence; T > 1 writes the state to the shadow.
  Status gdn(const DevBlock& b) {
    const GdnDims& d = m_.gdn_dims;
    GdnLayerState& g = m_.gdn[b.plan.slot];
    const Act u = s_.u.act(T_);
    const int64_t conv_dim = d.conv_dim(), inner = c_.ssm_inner, nv = d.n_v_heads;
    STRATA_TRY(op(linear(b.qkv, u, s_.m, conv_dim, st_)));
    STRATA_TRY(op(linear(b.z_proj, u, s_.z, inner, st_)));
    STRATA_TRY(op(linear(b.beta, u, g.b, nv, st_)));
    STRATA_TRY(op(linear(b.alpha, u, g.a, nv, st_)));
    STRATA_TRY(op(gdn_conv(d, s_.m, conv_dim, b.conv_w, g.hist, T_, g.c, st_)));
    float* state_out = T_ == 1 ? g.ssm : g.shadow;
    STRATA_TRY(op(gdn_recurrent(d, g.c, g.b, g.a, nv, b.ssm_a, b.dt_bias, g.ssm, state_out, T_, s_.o, st_)));
    STRATA_TRY(op(gdn_gated_norm(d, s_.o, s_.z, inner, b.ssm_norm, T_, s_.yn.f32, st_)));
    STRATA_TRY(quantize_for(s_.yn, {&b.ssm_out}));
    return op(linear(b.ssm_out, s_.yn.act(T_), s_.y, H_, st_));
  }

  // Full attention with the QSA indexer (spec §7); dense when the block has no indexer.
  Status attention(const DevBlock& b) {
    const AttnDims d = m_.attn_dims(b);
    const AttnCacheView& cache = m_.attn[b.plan.slot];
    const Act u = s_.u.act(T_);
    const int64_t nh = d.n_head, hd = d.head_dim, kv = static_cast<int64_t>(d.n_head_kv) * hd;
    STRATA_TRY(op(linear(b.q, u, s_.qg, nh * 2 * hd, st_)));
    STRATA_TRY(op(linear(b.k, u, s_.k, kv, st_)));
    STRATA_TRY(op(linear(b.v, u, s_.v, kv, st_)));
    if (d.ratio > 0) {
      STRATA_TRY(op(linear(b.iq, u, s_.iq, static_cast<int64_t>(d.idx_heads) * d.idx_head_dim, st_)));
      STRATA_TRY(op(linear(b.ik, u, s_.ik, d.idx_head_dim, st_)));
    }
    AttnPrepArgs a;
    a.qg = s_.qg;
    a.k = s_.k;
    a.v = s_.v;
    a.q_norm = b.q_norm;
    a.k_norm = b.k_norm;
    a.q_out = s_.q_out;
    if (d.ratio > 0) {
      a.iq = s_.iq;
      a.ik = s_.ik;
      a.iq_norm = b.iq_norm;
      a.ik_norm = b.ik_norm;
      a.qi_out = s_.qi_out;
    }
    const int64_t* pos = s_.pos();
    STRATA_TRY(op(attn_prep(d, a, pos, T_, cache, st_)));
    if (d.ratio > 0) STRATA_TRY(op(qsa_select(d, s_.qi_out, pos, T_, cache, s_.scores, s_.sel, s_.n_sel, st_)));
    STRATA_TRY(op(attn_decode(d, s_.q_out, s_.qg, pos, T_, cache, s_.sel, s_.n_sel, s_.attn_scratch, s_.ao.f32, st_)));
    STRATA_TRY(quantize_for(s_.ao, {&b.o}));
    return op(linear(b.o, s_.ao.act(T_), s_.y, H_, st_));
  }

  // MoE (spec §8): router -> top-k -> grouped experts into y; the gated shared expert added.
  Status moe(const DevBlock& b) {
    const int E = static_cast<int>(c_.n_expert), k = static_cast<int>(c_.n_expert_used);
    const int64_t ff = c_.n_ff_shexp;
    const ExpertWeights& e = b.experts;
    STRATA_TRY(quantize_for(s_.u, {&b.router, &e.gate, &e.up, &e.gate_up, &b.sh_gate, &b.sh_up}));
    const Act u = s_.u.act(T_);
    STRATA_TRY(op(linear(b.router, u, s_.router_logits, E, st_)));
    STRATA_TRY(op(router_topk(s_.router_logits, T_, E, k, s_.ids, s_.weights, st_)));
    STRATA_TRY(stage("router", b.index, s_.router_logits, E));
    STRATA_TRY(op(native_expert_grouped(e, u, s_.ids, s_.weights, k, s_.experts, s_.y, st_)));
    STRATA_TRY(stage("experts", b.index, s_.y, H_));

    STRATA_TRY(op(linear(b.sh_gate, u, s_.sg, ff, st_)));
    STRATA_TRY(op(linear(b.sh_up, u, s_.su, ff, st_)));
    void* h_q8 = takes_q8(b.sh_down) ? s_.h.q8 : nullptr;
    STRATA_TRY(op(swiglu(s_.sg, s_.su, ff, T_, static_cast<int>(ff), s_.h.f32, h_q8, q8_stride_for(ff), st_)));
    STRATA_TRY(op(linear(b.sh_down, s_.h.act(T_), s_.s, H_, st_)));
    STRATA_TRY(op(linear(b.sh_gate_inp, u, s_.gate_logit, 1, st_)));
    if (obs_ && obs_->wants_values()) {
      // The reference dumps the gated shared output on its own: 0 + s * gate is that value exactly.
      DECODER_CUDA_TRY(cudaMemsetAsync(s_.shared, 0, sizeof(float) * static_cast<size_t>(T_) * H_, st_));
      STRATA_TRY(op(shared_gate_add(s_.shared, s_.s, s_.gate_logit, T_, H_, st_)));
    }
    STRATA_TRY(stage("shared", b.index, s_.shared, H_));
    return op(shared_gate_add(s_.y, s_.s, s_.gate_logit, T_, H_, st_));
  }

  Decoder::Impl& m_;
  const model::ModelConfig& c_;
  const Scratch& s_;
  cudaStream_t st_;
  const int T_;
  StageObserver* obs_;
  const int S_, H_;
  const int64_t W_;
};

}  // namespace

Status Decoder::Impl::run_window(int T, StageObserver* obs) { return WindowRun(*this, T, obs).run(); }

// Keeps the first n rows of a window of T: conv histories end at row n; the recurrent state
// becomes the shadow (n == T) or the replay of rows 0..n-1 from the untouched state (n < T).
// T == 1 ran in place. Attention caches need nothing: the rows past n are rewritten by the
// next window before any query can see them (attn_prep appends before attn_decode reads, and a
// block key is recomputed by the window that completes the block).
Status Decoder::Impl::run_commit(int T, int n) {
  for (const DevBlock& b : w.blocks) {
    if (b.plan.mixer != model::Mixer::Gdn) continue;
    GdnLayerState& g = gdn[b.plan.slot];
    STRATA_TRY(gdn_conv_commit(gdn_dims, g.hist, n, stream));
    if (T == 1) continue;
    if (n == T) {
      const size_t bytes = sizeof(float) * static_cast<size_t>(gdn_dims.n_v_heads) * gdn_dims.head_dim * gdn_dims.head_dim;
      DECODER_CUDA_TRY(cudaMemcpyAsync(g.ssm, g.shadow, bytes, cudaMemcpyDeviceToDevice, stream));
    } else {
      STRATA_TRY(gdn_recurrent(gdn_dims, g.c, g.b, g.a, gdn_dims.n_v_heads, b.ssm_a, b.dt_bias, g.ssm, g.ssm, n, s.o,
                               stream));
    }
  }
  if (config.has_ple) STRATA_TRY(ple_conv_commit(ple_dims, ple_hist, n, stream));
  return Status::ok_status();
}

}  // namespace strata::cuda
