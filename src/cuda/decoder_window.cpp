// The op sequence of one window, in the reference forward's order (src/reference/forward.cpp):
// embed -> broadcast -> per trunk block [PLE] -> HC attn mix -> GDN | attention -> combine ->
// HC ffn mix -> MoE -> combine -> final mixer -> head -> argmax; and the commit sequence that
// keeps the first n rows of a window. Every call here only launches work on the decoder's
// stream (capturable), reading the window's inputs from device memory.
#include <algorithm>
#include <string>
#include <string_view>

#include "decoder_internal.h"
#include "strata/cuda/get_rows.h"
#include "strata/cuda/switches.h"

namespace strata::cuda {
namespace {

// Runs one window's ops for T rows, telling the observer (if any) after each stage.
class WindowRun {
 public:
  WindowRun(Decoder::Impl& m, int T, StageObserver* obs)
      : m_(m), c_(m.config), s_(m.s), st_(m.stream), T_(T), obs_(obs),
        S_(static_cast<int>(c_.hc_count)), H_(static_cast<int>(c_.n_embd)), W_(static_cast<int64_t>(c_.n_wide())) {}

  Status run(WindowPart part) {
    const size_t split = part == WindowPart::All ? 0 : m_.first_ple_block();
    const size_t begin = part == WindowPart::FromPle ? split : 0;
    const size_t end = part == WindowPart::BeforePle ? split : m_.w.blocks.size();
    if (part != WindowPart::FromPle) STRATA_TRY(embed());
    for (size_t i = begin; i < end; ++i) STRATA_TRY(block(m_.w.blocks[i]));
    if (part == WindowPart::BeforePle) return Status::ok_status();
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
    if (&a == &s_.u && u_q8_ready_) return Status::ok_status();  // hc_post wrote it with u
    for (const DTensor* w : consumers)
      if (takes_q8(*w)) return op(quantize_act(a.act(T_), st_));
    return Status::ok_status();
  }

  // The second stream for launches independent of the ones that follow on st_: Impl::side_stream
  // without an observer (the graphs and the plain run); with one (stage values or the profile's
  // events) everything stays in order on st_. fork(side) lets side start after what st_ has
  // issued; join(side) makes st_ wait for what side has issued since. The first launch after a
  // fork goes without PDL (launch.h: after a wait on another stream's event). So does the one
  // after a join, except in windows of up to kJoinPdlRows rows: captured, both of its edges (to
  // st_'s and side's last kernels) are then programmatic, and its pdl_wait() still returns only
  // once every prerequisite grid has completed and its writes are visible (PTX
  // griddepcontrol.wait), so it may start while either still runs. H200, iq3_xxs: T = 1 -1.6%
  // (the MoE's down launch starts under the routed gate/up and the shared expert); T = 4 +0.9%
  // (its waiting CTAs hold slots that the shared expert and gate/up's last wave need); the same
  // at the fork measured no better (bench/results/2026-12-02-h200-join-pdl).
  static constexpr int kJoinPdlRows = 1;
  cudaStream_t side() const { return obs_ == nullptr && m_.side_stream != nullptr ? m_.side_stream : st_; }
  Status fork(cudaStream_t side) {
    if (side == st_) return Status::ok_status();
    DECODER_CUDA_TRY(cudaEventRecord(m_.side_fork, st_));
    DECODER_CUDA_TRY(cudaStreamWaitEvent(side, m_.side_fork, 0));
    pdl_full_dependency_next(side);
    return Status::ok_status();
  }
  Status join(cudaStream_t side) {
    if (side == st_) return Status::ok_status();
    DECODER_CUDA_TRY(cudaEventRecord(m_.side_join, side));
    DECODER_CUDA_TRY(cudaStreamWaitEvent(st_, m_.side_join, 0));
    if (T_ > kJoinPdlRows) pdl_full_dependency_next(st_);
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

  // HC mix of x into u (and alpha when the site injects), spec §4 steps 1-5. Float HC weights
  // take the fused pair (hc_pre, hc_post: two launches, u's q8_1 form written with u); quantized
  // ones the step-by-step path with mat-vecs through linear(). fold_combine (see folds_combine):
  // hc_pre also does the pending combine x + alpha (x) y, into hc_x_alt, and writes this site's
  // alpha to hc_alpha_alt.
  Status hc_mix(const HcSite& hc, bool fold_combine = false) {
    const float eps = c_.rms_eps;
    const int rank = static_cast<int>(c_.hc_rank);
    u_q8_ready_ = false;
    if (hc_fused_supported(hc.down, hc.up, hc.inject, S_, H_, rank)) {
      HcPreArgs pre;
      pre.x = s_.x;
      pre.norm = hc.norm;
      pre.down = hc.down;
      pre.inject = hc.inject;
      pre.T = T_;
      pre.S = S_;
      pre.H = H_;
      pre.rank = rank;
      pre.eps = eps;
      pre.r = s_.d.f32;
      pre.alpha = s_.alpha;
      pre.inv_rms = s_.hc_inv_rms;
      if (fold_combine) {
        pre.y = s_.y;
        pre.alpha_prev = s_.alpha;
        pre.x_out = s_.hc_x_alt;
        pre.alpha = s_.hc_alpha_alt;
      }
      STRATA_TRY(op(hc_pre(pre, st_)));
      HcPostArgs post;
      post.x = fold_combine ? s_.hc_x_alt : s_.x;
      post.norm = hc.norm;
      post.inv_rms = s_.hc_inv_rms;
      post.r = s_.d.f32;
      post.up = hc.up;
      post.T = T_;
      post.S = S_;
      post.H = H_;
      post.rank = rank;
      post.u = s_.u.f32;
      // Always written: its few bytes cost less than a separate quantize launch when a
      // quantized weight reads u, and nothing reads them otherwise.
      post.u_q8 = s_.u.q8;
      post.u_q8_stride = s_.u.act(T_).q8_stride;
      STRATA_TRY(op(hc_post(post, st_)));
      u_q8_ready_ = true;
      return Status::ok_status();
    }
    if (fold_combine) return Status::error("cuda decoder: a combine fold asked of an HC site without the fused path");
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
    // The attn combine folded into the ffn site's hc_pre (X then lives in hc_x_alt until the ffn
    // combine writes it back to x), or on its own.
    const bool fold = folds_combine(b.ffn_hc);
    if (!fold) STRATA_TRY(op(hc_combine(s_.x, s_.y, s_.alpha, T_, S_, H_, st_)));
    STRATA_TRY(stage("hc_attn_combine", b.index, fold ? s_.hc_x_alt : s_.x, W_));
    STRATA_TRY(hc_mix(b.ffn_hc, fold));
    STRATA_TRY(stage("hc_ffn_mix", b.index, s_.u.f32, H_));
    // The ffn combine, X (hc_x_alt with the fold) + alpha (x) y into x, in the MoE's own last launch.
    WideCombine wide;
    wide.x = fold ? s_.hc_x_alt : s_.x;
    wide.alpha = fold ? s_.hc_alpha_alt : s_.alpha;
    wide.S = S_;
    wide.out = s_.x;
    STRATA_TRY(moe(b, wide));
    return stage("hc_ffn_combine", b.index, s_.x, W_);
  }

  // Whether the ffn site's hc_pre takes the attn combine: it has the fused path, and no observer
  // reads stage values (the fold has no combined X to show at the hc_attn_combine stage; it is
  // only written by hc_pre, after that stage).
  bool folds_combine(const HcSite& ffn) const {
    if (obs_ && obs_->wants_values()) return false;
    return hc_fused_supported(ffn.down, ffn.up, ffn.inject, S_, H_, static_cast<int>(c_.hc_rank));
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
  // commit of fewer rows can replay the recurrence; T > 1 writes the layer's other state
  // (GdnLayerState). With the concatenated weights one mat-vec writes m | z and one b | a per
  // row: the consumers read them as strided slices, and gdn_conv_recurrent copies b/a into the
  // layer's contiguous g.b/g.a for the replay. The gated norm runs inside gdn_conv_recurrent's launch when it can take it
  // (gdn_fused_norm_supported), with the bits of the separate gdn_gated_norm launch; either way o
  // stays in s_.o and the normed rows (and their q8_1 form, for ssm_out) go to s_.yn. The
  // concatenated beta|alpha matrix (float types) is projected inside that launch too (one launch
  // fewer on each GDN layer's path; b/a still kept in g.b/g.a), unless STRATA_UNFUSE=gdn-gates.
  Status gdn(const DevBlock& b) {
    const GdnDims& d = m_.gdn_dims;
    GdnLayerState& g = m_.gdn[b.plan.slot];
    const Act u = s_.u.act(T_);
    const int64_t conv_dim = d.conv_dim(), inner = c_.ssm_inner, nv = d.n_v_heads;
    const float* m = s_.m;
    const float* z = s_.z;
    int64_t m_stride = conv_dim, z_stride = inner;
    if (b.qkvz) {
      m_stride = z_stride = conv_dim + inner;
      STRATA_TRY(op(linear(b.qkvz, u, s_.mz, m_stride, st_)));
      m = s_.mz;
      z = s_.mz + conv_dim;
    } else {
      STRATA_TRY(op(linear(b.qkv, u, s_.m, conv_dim, st_)));
      STRATA_TRY(op(linear(b.z_proj, u, s_.z, inner, st_)));
    }
    // The conv runs inside the recurrent launch; g.c still gets every conv output for the replay.
    GdnConvRecurrentArgs r;
    r.m = m;
    r.m_stride = m_stride;
    r.conv_w = b.conv_w;
    r.hist = g.hist;
    r.c = g.c;
    r.ssm_a = b.ssm_a;
    r.dt_bias = b.dt_bias;
    r.state_in = g.ssm[m_.state_side];
    r.state_out = g.ssm[T_ == 1 ? m_.state_side : 1 - m_.state_side];
    r.out = s_.o;
    r.T = T_;
    GdnGateProjection proj;  // b and a projected inside the recurrent launch: one launch fewer a layer
    proj.w = b.ba.data;
    proj.type = b.ba.type;
    proj.k = b.ba.cols;
    proj.u = u.f32;
    proj.u_stride = u.f32_stride;
    const bool packed = b.ba.row_bytes == b.ba.cols * (b.ba.type == quant::Type::F32 ? 4 : 2);
    if (b.ba && !switches().unfuse_gdn_gates && b.ba.rows == 2 * nv && packed &&
        gdn_gate_projection_refusal(d, proj).empty()) {
      r.proj = proj;
      r.b_keep = g.b;
      r.a_keep = g.a;
    } else if (b.ba) {
      STRATA_TRY(op(linear(b.ba, u, s_.ba, 2 * nv, st_)));
      r.b = s_.ba;
      r.a = s_.ba + nv;
      r.ba_stride = 2 * nv;
      r.b_keep = g.b;
      r.a_keep = g.a;
    } else {
      STRATA_TRY(op(linear(b.beta, u, g.b, nv, st_)));
      STRATA_TRY(op(linear(b.alpha, u, g.a, nv, st_)));
      r.b = g.b;
      r.a = g.a;
      r.ba_stride = nv;
    }
    void* yn_q8 = takes_q8(b.ssm_out) ? s_.yn.q8 : nullptr;
    const bool fused_norm = !switches().unfuse_gdn_norm && gdn_fused_norm_supported(d);
    if (fused_norm) {
      r.norm.z = z;
      r.norm.z_stride = z_stride;
      r.norm.w = b.ssm_norm;
      r.norm.y = s_.yn.f32;
      r.norm.y_q8 = yn_q8;
      r.norm.q8_stride = q8_stride_for(inner);
    }
    STRATA_TRY(op(gdn_conv_recurrent(d, r, st_)));
    if (!fused_norm)
      STRATA_TRY(op(gdn_gated_norm(d, s_.o, z, z_stride, b.ssm_norm, T_, s_.yn.f32, st_, yn_q8, q8_stride_for(inner))));
    return op(linear(b.ssm_out, s_.yn.act(T_), s_.y, H_, st_));
  }

  // Full attention with the QSA indexer (spec §7); dense when the block has no indexer. With the
  // concatenated weights one mat-vec writes qg | k | v per row (and one iq | ik): attn_prep and
  // attn_decode read them as strided slices. attn_decode writes ao's q8_1 form itself.
  Status attention(const DevBlock& b) {
    const AttnDims d = m_.attn_dims(b);
    const AttnCacheView& cache = m_.attn[b.plan.slot];
    const Act u = s_.u.act(T_);
    const int64_t nh = d.n_head, hd = d.head_dim, kv = static_cast<int64_t>(d.n_head_kv) * hd;
    const int64_t nq = nh * 2 * hd;
    AttnPrepArgs a;
    if (b.qkv_attn) {
      a.qg_stride = a.kv_stride = nq + 2 * kv;
      STRATA_TRY(op(linear(b.qkv_attn, u, s_.qkv_out, a.qg_stride, st_)));
      a.qg = s_.qkv_out;
      a.k = s_.qkv_out + nq;
      a.v = s_.qkv_out + nq + kv;
    } else {
      STRATA_TRY(op(linear(b.q, u, s_.qg, nq, st_)));
      STRATA_TRY(op(linear(b.k, u, s_.k, kv, st_)));
      STRATA_TRY(op(linear(b.v, u, s_.v, kv, st_)));
      a.qg = s_.qg;
      a.k = s_.k;
      a.v = s_.v;
    }
    if (d.ratio > 0) {
      const int64_t niq = static_cast<int64_t>(d.idx_heads) * d.idx_head_dim;
      if (b.idx_qk) {
        a.iq_stride = a.ik_stride = niq + d.idx_head_dim;
        STRATA_TRY(op(linear(b.idx_qk, u, s_.idx_out, a.iq_stride, st_)));
        a.iq = s_.idx_out;
        a.ik = s_.idx_out + niq;
      } else {
        STRATA_TRY(op(linear(b.iq, u, s_.iq, niq, st_)));
        STRATA_TRY(op(linear(b.ik, u, s_.ik, d.idx_head_dim, st_)));
        a.iq = s_.iq;
        a.ik = s_.ik;
      }
    }
    a.q_norm = b.q_norm;
    a.k_norm = b.k_norm;
    a.q_out = s_.q_out;
    if (d.ratio > 0) {
      a.iq_norm = b.iq_norm;
      a.ik_norm = b.ik_norm;
      a.qi_out = s_.qi_out;
    }
    const int64_t* pos = s_.pos();
    STRATA_TRY(op(attn_prep(d, a, pos, T_, cache, st_)));
    if (d.ratio > 0) STRATA_TRY(op(qsa_select(d, s_.qi_out, pos, T_, cache, s_.scores, s_.sel, s_.n_sel, st_)));
    void* ao_q8 = takes_q8(b.o) ? s_.ao.q8 : nullptr;
    STRATA_TRY(op(attn_decode(d, s_.q_out, a.qg, pos, T_, cache, s_.sel, s_.n_sel, s_.attn_scratch, s_.ao.f32, st_,
                              a.qg_stride, ao_q8, q8_stride_for(nh * hd))));
    return op(linear(b.o, s_.ao.act(T_), s_.y, H_, st_));
  }

  // MoE (spec §8): router (+ the shared gate's logit) -> top-k and grouping in one kernel -> the
  // grouped experts' gate/up; the shared expert; then the down call, which with the direct kernel also
  // forms the routed sum and the gated shared output into y and applies `wide` (the block's ffn
  // combine) to the wide residual (expert_down_combine; else one combine launch does). Concatenated
  // weights (router_gi, sh_gate_up) when uploaded, else their parts.
  // The shared expert runs on side() beside the routed path (forked after u, joined before the
  // down call): the two read only u and write disjoint scratch, and the routed path's short
  // launches (the one-CTA route_and_group among them) leave most SMs free.
  Status moe(const DevBlock& b, const WideCombine& wide) {
    const int E = static_cast<int>(c_.n_expert), k = static_cast<int>(c_.n_expert_used);
    const ExpertWeights& e = b.experts;
    const bool values = obs_ && obs_->wants_values();
    STRATA_TRY(quantize_for(s_.u, {&b.router, &b.router_gi, &e.gate, &e.up, &e.gate_up, &b.sh_gate, &b.sh_up,
                                   &b.sh_gate_up, &b.sh_gate_inp}));
    const Act u = s_.u.act(T_);
    const cudaStream_t sh = side();
    const bool forked = sh != st_;
    if (forked) {
      STRATA_TRY(fork(sh));
      if (!b.router_gi) STRATA_TRY(op(linear(b.sh_gate_inp, u, s_.gate_logit, 1, sh)));
      STRATA_TRY(shared_expert(b, u, sh));
    }
    const float* logits = s_.router_logits;  // row t at logits + t * logit_stride
    int64_t logit_stride = E;
    const float* gate_logit = s_.gate_logit;  // row t at gate_logit[t * gate_stride]
    int64_t gate_stride = 1;
    if (b.router_gi) {
      STRATA_TRY(op(linear(b.router_gi, u, s_.router_gi_out, E + 1, st_)));
      logits = s_.router_gi_out;
      logit_stride = E + 1;
      gate_logit = s_.router_gi_out + E;
      gate_stride = E + 1;
    } else {
      STRATA_TRY(op(linear(b.router, u, s_.router_logits, E, st_)));
      if (!forked) STRATA_TRY(op(linear(b.sh_gate_inp, u, s_.gate_logit, 1, st_)));
    }
    STRATA_TRY(op(route_and_group(logits, logit_stride, T_, k, e, s_.experts, s_.ids, s_.weights, st_)));
    if (values && logits != s_.router_logits) {
      // The stage holds the logits as contiguous rows of E.
      DECODER_CUDA_TRY(cudaMemcpy2DAsync(s_.router_logits, sizeof(float) * E, logits, sizeof(float) * logit_stride,
                                         sizeof(float) * E, T_, cudaMemcpyDeviceToDevice, st_));
      pdl_full_dependency_next(st_);
    }
    STRATA_TRY(stage("router", b.index, s_.router_logits, E));
    if (values) {
      // The routed sum on its own exists only for the stage; the window adds it with the shared output.
      STRATA_TRY(op(expert_mlp_grouped(e, u, k, s_.experts, st_)));
      STRATA_TRY(op(expert_combine(e, T_, k, s_.experts, s_.y, st_)));
    } else {
      // The down launch, which also forms the routed sum, follows the join below (it reads s).
      STRATA_TRY(op(expert_gate_up_grouped(e, u, k, s_.experts, st_)));
    }
    STRATA_TRY(stage("experts", b.index, s_.y, H_));

    if (forked) {
      STRATA_TRY(join(sh));
    } else {
      STRATA_TRY(shared_expert(b, u, st_));
    }
    if (values) {
      // The reference dumps the gated shared output on its own: 0 + s * gate is that value exactly.
      DECODER_CUDA_TRY(cudaMemsetAsync(s_.shared, 0, sizeof(float) * static_cast<size_t>(T_) * H_, st_));
      pdl_full_dependency_next(st_);
      STRATA_TRY(op(shared_gate_add(s_.shared, s_.s, gate_logit, gate_stride, T_, H_, st_)));
    }
    STRATA_TRY(stage("shared", b.index, s_.shared, H_));
    if (values) return op(expert_combine_shared(e, T_, k, s_.experts, s_.s, gate_logit, gate_stride, s_.y, st_, &wide));
    // One set of tile counts serves every MoE block, the MTP block's too: all these launches run on
    // st_ (never on side()), the trunk's and the MTP step's graphs alike, so never two at once.
    uint32_t* tiles = switches().unfuse_combine ? nullptr : s_.tile_counts;
    return op(expert_down_combine(e, T_, k, s_.experts, s_.s, gate_logit, gate_stride, s_.y, &wide, tiles,
                                  s_.tile_count_cap, st_));
  }

  // The shared expert's ungated output s = down(silu(gate u) * up u) on stream `on`.
  Status shared_expert(const DevBlock& b, const Act& u, cudaStream_t on) {
    const int64_t ff = c_.n_ff_shexp;
    void* h_q8 = takes_q8(b.sh_down) ? s_.h.q8 : nullptr;
    if (b.sh_gate_up) {
      float* gu = s_.sh_gate_up_out;  // row t: gate (ff) then up (ff)
      STRATA_TRY(op(linear(b.sh_gate_up, u, gu, 2 * ff, on)));
      // At T = 1, SwiGLU inside the down launch where the down type allows: on the side stream
      // the routed gate/up's CTAs hold every SM, so each launch of the shared expert waits for
      // slots, and one launch fewer ends it earlier (H200, iq3_xxs: T = 1 -1.05%). At T = 4 the
      // fused form (dp4a per entry) took +2.6% against mmvq_decode_kernel's tensor cores
      // (bench/results/2026-12-02-h200-join-pdl).
      if (T_ == 1 && h_q8 != nullptr && !switches().unfuse_shared_down && shared_down_fused_supports(b.sh_down, T_))
        return op(shared_down_fused(b.sh_down, gu, T_, s_.shared_grouping + 4 * (T_ - 1), s_.s, s_.h.f32, h_q8,
                                    q8_stride_for(ff), on));
      STRATA_TRY(op(swiglu(gu, gu + ff, 2 * ff, T_, static_cast<int>(ff), s_.h.f32, h_q8, q8_stride_for(ff), on)));
    } else {
      STRATA_TRY(op(linear(b.sh_gate, u, s_.sg, ff, on)));
      STRATA_TRY(op(linear(b.sh_up, u, s_.su, ff, on)));
      STRATA_TRY(op(swiglu(s_.sg, s_.su, ff, T_, static_cast<int>(ff), s_.h.f32, h_q8, q8_stride_for(ff), on)));
    }
    return op(linear(b.sh_down, s_.h.act(T_), s_.s, H_, on));
  }

  Decoder::Impl& m_;
  const model::ModelConfig& c_;
  const Scratch& s_;
  cudaStream_t st_;
  const int T_;
  StageObserver* obs_;
  const int S_, H_;
  const int64_t W_;
  bool u_q8_ready_ = false;  // s_.u.q8 holds u's q8_1 form (hc_post wrote it); quantize_for skips u

 public:
  // The MTP head over the T rows of x (its fused input, written by the MTP step in
  // decoder_mtp.cpp), as run() ends the trunk: the MTP block through block() (a trunk attention
  // layer; its attention works on its own cache slot at the positions the step staged), then
  // the MTP's own mixer and the shared lm_head (reference::forward_mtp after its mtp_input
  // stage). x keeps the block's wide output, the input of a chained step.
  Status mtp_layer(const DevMtp& mtp) {
    const DevBlock& b = mtp.block;
    STRATA_TRY(block(b));
    STRATA_TRY(hc_mix(mtp.head_hc));
    STRATA_TRY(stage("mtp_mix", b.index, s_.u.f32, H_));
    STRATA_TRY(quantize_for(s_.u, {&m_.w.output}));
    STRATA_TRY(op(linear(m_.w.output, s_.u.act(T_), s_.logits, c_.n_vocab, st_)));
    return stage("mtp_head", b.index, s_.logits, c_.n_vocab);
  }
};

}  // namespace

Status Decoder::Impl::run_window(int T, StageObserver* obs, WindowPart part) {
  return WindowRun(*this, T, obs).run(part);
}

size_t Decoder::Impl::first_ple_block() const {
  for (size_t i = 0; i < w.blocks.size(); ++i)
    if (w.blocks[i].plan.ple) return i;
  return w.blocks.size();
}

// Keeps the first n rows of a window of T: conv histories end at row n (every GDN layer's in one
// launch); the recurrent state is the window's (n == T: commit() then flips state_side, no copy)
// or the replay of rows 0..n-1 from the untouched state (n < T). T == 1 ran in place. Attention
// caches need nothing: the rows past n are rewritten by the next window before any query can see
// them (attn_prep appends before attn_decode reads, and a block key is recomputed by the window
// that completes the block).
Status Decoder::Impl::run_commit(int T, int n) {
  if (!gdn.empty()) STRATA_TRY(gdn_conv_commit(gdn_dims, s.gdn_hists, static_cast<int>(gdn.size()), n, stream));
  if (T > 1 && n < T) {
    for (const DevBlock& b : w.blocks) {
      if (b.plan.mixer != model::Mixer::Gdn) continue;
      GdnLayerState& g = gdn[b.plan.slot];
      float* state = g.ssm[state_side];
      STRATA_TRY(gdn_recurrent(gdn_dims, g.c, g.b, g.a, gdn_dims.n_v_heads, b.ssm_a, b.dt_bias, state, state, n, s.o,
                               stream));
    }
  }
  if (config.has_ple) STRATA_TRY(ple_conv_commit(ple_dims, ple_hist, n, stream));
  return Status::ok_status();
}

Status Decoder::Impl::run_mtp_layer(int T, StageObserver* obs) { return WindowRun(*this, T, obs).mtp_layer(*w.mtp); }

}  // namespace strata::cuda
