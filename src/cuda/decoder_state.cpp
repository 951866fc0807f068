// The decoder's state (GDN conv history and its two recurrent states for verify windows,
// attention K/V and index caches, the PLE conv history) and the scratch of one window, each
// carved from one device allocation sized for max_window rows and max_ctx tokens.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "decoder_internal.h"

namespace strata::cuda {

DeviceMemory::~DeviceMemory() {
  if (p_) cudaFree(p_);
}

Status DeviceMemory::alloc(int64_t bytes, const std::string& what) {
  const int64_t n = std::max<int64_t>(bytes, kDeviceAlign);
  const cudaError_t e = cudaMalloc(&p_, static_cast<size_t>(n));
  if (e != cudaSuccess) {
    p_ = nullptr;
    cudaGetLastError();  // an allocation failure is not sticky; clear it for the caller
    char size[64];
    std::snprintf(size, sizeof size, "%.2f GiB", static_cast<double>(n) / (1 << 30));
    return Status::error("cuda decoder: cannot allocate " + what + ": " + std::to_string(n) + " bytes (" + size +
                         "): " + cudaGetErrorString(e));
  }
  bytes_ = n;
  return Status::ok_status();
}

PinnedMemory::~PinnedMemory() {
  if (p_) cudaFreeHost(p_);
}

Status PinnedMemory::alloc(int64_t bytes, const std::string& what) {
  const int64_t n = std::max<int64_t>(bytes, kDeviceAlign);
  const cudaError_t e = cudaMallocHost(&p_, static_cast<size_t>(n));
  if (e != cudaSuccess) {
    p_ = nullptr;
    cudaGetLastError();
    return Status::error("cuda decoder: cannot allocate pinned host memory for " + what + ": " + std::to_string(n) +
                         " bytes: " + cudaGetErrorString(e));
  }
  return Status::ok_status();
}

void ActBuffer::carve(Carver& c, int64_t n_cols, int rows) {
  cols = n_cols;
  f32 = c.take<float>(n_cols * rows);
  q8 = c.take<uint8_t>(q8_stride_for(n_cols) * rows);
}

Act ActBuffer::act(int T) const {
  Act a;
  a.f32 = f32;
  a.f32_stride = cols;
  a.q8 = q8;
  a.q8_stride = q8_stride_for(cols);
  a.cols = cols;
  a.T = T;
  return a;
}

AttnDims Decoder::Impl::attn_dims(const DevBlock& blk) const {
  const model::ModelConfig& c = config;
  AttnDims d;
  d.n_head = static_cast<int>(c.n_head);
  d.n_head_kv = static_cast<int>(c.n_head_kv);
  d.head_dim = static_cast<int>(c.head_dim);
  d.n_rot = static_cast<int>(c.n_rot);
  d.rope_theta = c.rope_theta;
  d.eps = c.rms_eps;
  d.max_ctx = cache_ctx;
  if (blk.iq) {  // uploaded only for a sparse block (compress ratio and indexer tensors)
    d.idx_heads = static_cast<int>(c.indexer_n_head);
    d.idx_head_dim = static_cast<int>(c.indexer_head_dim);
    d.ratio = static_cast<int>(blk.plan.compress_ratio);
    d.top_blocks = static_cast<int>(c.indexer_top_k / blk.plan.compress_ratio);
  }
  return d;
}

int64_t Decoder::Impl::max_attn_scratch_bytes() const {
  int64_t bytes = 0;
  for (const DevBlock& b : w.blocks)
    if (b.plan.mixer == model::Mixer::Attention) bytes = std::max(bytes, attn_decode_scratch_bytes(attn_dims(b), options.max_window));
  // The MTP block's attention runs on the same scratch (dense when its indexer is absent).
  if (w.mtp) bytes = std::max(bytes, attn_decode_scratch_bytes(attn_dims(w.mtp->block), options.max_window));
  return bytes;
}

namespace {

// Everything that lives across windows; the same call order on both Carver passes.
void carve_state(Decoder::Impl& m, Carver& cv) {
  const model::ModelConfig& c = m.config;
  const int tmax = m.options.max_window;
  const int64_t max_ctx = m.cache_ctx;
  m.gdn.assign(c.plan.n_gdn, GdnLayerState{});
  m.attn.assign(c.plan.n_attn, AttnCacheView{});
  const int64_t conv_dim = c.ssm_conv_dim();
  const int64_t ssm = static_cast<int64_t>(c.ssm_n_v_heads) * c.ssm_head_dim * c.ssm_head_dim;
  for (const DevBlock& b : m.w.blocks) {
    if (b.plan.mixer == model::Mixer::Gdn) {
      GdnLayerState& g = m.gdn[b.plan.slot];
      g.hist = cv.take<float>((c.ssm_conv_kernel - 1 + tmax) * conv_dim);
      g.ssm[0] = cv.take<float>(ssm);
      g.ssm[1] = cv.take<float>(ssm);
      g.c = cv.take<float>(tmax * conv_dim);
      g.b = cv.take<float>(tmax * static_cast<int64_t>(c.ssm_n_v_heads));
      g.a = cv.take<float>(tmax * static_cast<int64_t>(c.ssm_n_v_heads));
    } else {
      AttnCacheView& a = m.attn[b.plan.slot];
      const int64_t kv = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
      a.k = cv.take<float>(max_ctx * kv);
      a.v = cv.take<float>(max_ctx * kv);
      if (b.iq) {
        a.index_k = cv.take<float>(max_ctx * c.indexer_head_dim);
        a.block_k = cv.take<float>(max_ctx / b.plan.compress_ratio * c.indexer_head_dim);
      }
    }
  }
  if (c.has_ple) m.ple_hist = cv.take<float>((c.ple.history() + tmax) * static_cast<int64_t>(c.n_wide()));
}

// The window's scratch, sized for the largest of every block's needs.
void carve_scratch(Decoder::Impl& m, Carver& cv) {
  const model::ModelConfig& c = m.config;
  const int T = m.options.max_window;
  const int64_t H = c.n_embd, W = c.n_wide(), S = c.hc_count;
  Scratch& s = m.s;
  s.in = cv.take<WindowInputs>(1);
  s.gdn_hists = cv.take<float*>(static_cast<int64_t>(m.gdn.size()));
  s.embed = cv.take<float>(T * H);
  s.x = cv.take<float>(T * W);
  s.xn.carve(cv, W, T);
  s.d.carve(cv, c.hc_rank, T);
  s.inject = cv.take<float>(T * S);
  s.g = cv.take<float>(T * W);
  s.u.carve(cv, H, T);
  s.alpha = cv.take<float>(T * S);
  s.hc_inv_rms = cv.take<float>(T * S);
  s.hc_x_alt = cv.take<float>(T * W);
  s.hc_alpha_alt = cv.take<float>(T * S);
  s.y = cv.take<float>(T * H);
  if (c.plan.n_gdn > 0) {
    s.m = cv.take<float>(T * static_cast<int64_t>(c.ssm_conv_dim()));
    s.z = cv.take<float>(T * static_cast<int64_t>(c.ssm_inner));
    s.o = cv.take<float>(T * static_cast<int64_t>(c.ssm_inner));
    s.yn.carve(cv, c.ssm_inner, T);
    s.mz = cv.take<float>(T * (static_cast<int64_t>(c.ssm_conv_dim()) + c.ssm_inner));
    s.ba = cv.take<float>(T * 2 * static_cast<int64_t>(c.ssm_n_v_heads));
  }
  if (c.plan.n_attn > 0) {
    const int64_t nh = c.n_head, kv = static_cast<int64_t>(c.n_head_kv) * c.head_dim, hd = c.head_dim;
    s.qg = cv.take<float>(T * nh * 2 * hd);
    s.k = cv.take<float>(T * kv);
    s.v = cv.take<float>(T * kv);
    s.q_out = cv.take<float>(T * nh * hd);
    s.ao.carve(cv, nh * hd, T);
    s.qkv_out = cv.take<float>(T * (nh * 2 * hd + 2 * kv));
    s.attn_scratch = cv.take<uint8_t>(m.max_attn_scratch_bytes());
    int64_t max_blocks = 0, max_top = 0;
    for (const DevBlock& b : m.w.blocks)
      if (b.iq) {
        max_blocks = std::max<int64_t>(max_blocks, m.cache_ctx / b.plan.compress_ratio);
        max_top = std::max<int64_t>(max_top, c.indexer_top_k / b.plan.compress_ratio);
      }
    if (max_blocks > 0) {
      const int64_t iq = static_cast<int64_t>(c.indexer_n_head) * c.indexer_head_dim;
      s.iq = cv.take<float>(T * iq);
      s.ik = cv.take<float>(T * static_cast<int64_t>(c.indexer_head_dim));
      s.qi_out = cv.take<float>(T * iq);
      s.scores = cv.take<float>(T * max_blocks);
      s.sel = cv.take<int32_t>(T * max_top);
      s.n_sel = cv.take<int32_t>(T);
      s.idx_out = cv.take<float>(T * (iq + static_cast<int64_t>(c.indexer_head_dim)));
    }
  }
  s.router_logits = cv.take<float>(T * static_cast<int64_t>(c.n_expert));
  s.ids = cv.take<int32_t>(T * static_cast<int64_t>(c.n_expert_used));
  s.weights = cv.take<float>(T * static_cast<int64_t>(c.n_expert_used));
  int64_t expert_bytes = 0;
  const int cap = T * static_cast<int>(c.n_expert_used);
  for (const DevBlock& b : m.w.blocks) expert_bytes = std::max(expert_bytes, expert_scratch_bytes(b.experts, cap));
  if (m.w.mtp) expert_bytes = std::max(expert_bytes, expert_scratch_bytes(m.w.mtp->block.experts, cap));
  s.experts.base = cv.take<uint8_t>(expert_bytes);
  s.experts.bytes = expert_bytes;
  s.experts.cap_entries = cap;
  s.tile_count_cap = static_cast<int>(c.n_embd);  // a column tile has at least one row
  s.tile_counts = cv.take<uint32_t>(c.n_embd);
  s.sg = cv.take<float>(T * static_cast<int64_t>(c.n_ff_shexp));
  s.su = cv.take<float>(T * static_cast<int64_t>(c.n_ff_shexp));
  s.h.carve(cv, c.n_ff_shexp, T);
  s.shared_grouping = cv.take<int32_t>(4 * static_cast<int64_t>(T));
  s.s = cv.take<float>(T * H);
  s.gate_logit = cv.take<float>(T);
  s.shared = cv.take<float>(T * H);
  s.router_gi_out = cv.take<float>(T * (static_cast<int64_t>(c.n_expert) + 1));
  s.sh_gate_up_out = cv.take<float>(T * 2 * static_cast<int64_t>(c.n_ff_shexp));
  if (c.has_ple) {
    const int64_t rows = T * static_cast<int64_t>(c.ple.n_heads);
    s.ple_rows = cv.take<uint8_t>(rows * m.ple_row_bytes);
    s.ple_row_ids = cv.take<int32_t>(rows);
    s.e.carve(cv, c.ple.embed_dim(), T);
    s.kp = cv.take<float>(T * W);
    s.vp = cv.take<float>(T * H);
  }
  s.logits = cv.take<float>(T * static_cast<int64_t>(c.n_vocab));
  s.argmax = cv.take<int32_t>(T);
}

}  // namespace

Status Decoder::Impl::allocate_state_and_scratch() {
  const model::ModelConfig& c = config;
  gdn_dims.n_k_heads = static_cast<int>(c.ssm_n_k_heads);
  gdn_dims.n_v_heads = static_cast<int>(c.ssm_n_v_heads);
  gdn_dims.head_dim = static_cast<int>(c.ssm_head_dim);
  gdn_dims.conv_kernel = static_cast<int>(c.ssm_conv_kernel);
  gdn_dims.eps = c.rms_eps;
  ple_dims.S = static_cast<int>(c.hc_count);
  ple_dims.H = static_cast<int>(c.n_embd);
  ple_dims.ngram = static_cast<int>(c.ple.ngram_size);
  ple_dims.conv_kernel = static_cast<int>(c.ple.conv_kernel);
  ple_dims.eps = c.rms_eps;
  ple_row_bytes = c.has_ple && ple_table ? static_cast<int64_t>(ple_table->row_bytes) : 0;
  // attn_prep and qsa_select index block keys by position / ratio and want whole blocks.
  int64_t ratios = 1;  // their least common multiple
  for (const DevBlock& b : w.blocks)
    if (b.iq) ratios = std::lcm(ratios, static_cast<int64_t>(b.plan.compress_ratio));
  cache_ctx = align_up(options.max_ctx, ratios);

  Carver state_size(nullptr);
  carve_state(*this, state_size);
  STRATA_TRY(state_memory.alloc(state_size.used(), "the decoder state (GDN, KV and index caches for max_ctx " +
                                                       std::to_string(options.max_ctx) + ", PLE)"));
  Carver state_carver(state_memory.get());
  carve_state(*this, state_carver);

  Carver scratch_size(nullptr);
  carve_scratch(*this, scratch_size);
  STRATA_TRY(scratch_memory.alloc(scratch_size.used(), "the window scratch (max_window " +
                                                           std::to_string(options.max_window) + ")"));
  Carver scratch_carver(scratch_memory.get());
  carve_scratch(*this, scratch_carver);
  // The scratch words that must start at 0 (each launch leaves them 0); zero_state() below
  // synchronises the stream.
  DECODER_CUDA_TRY(cudaMemsetAsync(s.tile_counts, 0, sizeof(uint32_t) * static_cast<size_t>(s.tile_count_cap), stream));
  {
    std::vector<int32_t> words(4 * static_cast<size_t>(options.max_window));
    for (int t = 1; t <= options.max_window; ++t) {
      int32_t w4[4];
      shared_grouping_words(t, w4);
      std::copy(w4, w4 + 4, words.begin() + 4 * (t - 1));
    }
    DECODER_CUDA_TRY(cudaMemcpy(s.shared_grouping, words.data(), words.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  }
  if (!gdn.empty()) {  // gdn_conv_commit's table of the slots' histories
    std::vector<float*> hists;
    for (const GdnLayerState& g : gdn) hists.push_back(g.hist);
    DECODER_CUDA_TRY(cudaMemcpy(s.gdn_hists, hists.data(), hists.size() * sizeof(float*), cudaMemcpyHostToDevice));
  }

  STRATA_TRY(pinned_inputs.alloc(sizeof(WindowInputs), "the window inputs"));
  STRATA_TRY(pinned_argmax.alloc(options.max_window * static_cast<int64_t>(sizeof(int32_t)), "the argmax rows"));
  if (c.has_ple) {
    const int64_t rows = options.max_window * static_cast<int64_t>(c.ple.n_heads);
    STRATA_TRY(pinned_rows.alloc(rows * ple_row_bytes, "the n-gram row staging"));
    // get_rows reads the staged rows in order: ids 0 .. rows - 1, written once.
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    DECODER_CUDA_TRY(cudaMemcpy(s.ple_row_ids, ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  }
  if (w.mtp) STRATA_TRY(allocate_mtp());
  return zero_state();
}

Status Decoder::Impl::zero_state() {
  DECODER_CUDA_TRY(cudaMemsetAsync(state_memory.get(), 0, static_cast<size_t>(state_memory.bytes()), stream));
  if (mtp) STRATA_TRY(zero_mtp());
  DECODER_CUDA_TRY(cudaStreamSynchronize(stream));
  pos = 0;
  state_side = 0;
  pending_rows = 0;
  pending_tokens.clear();
  if (config.has_ple) ple_context.assign(config.ple.ngram_size - 1, static_cast<int32_t>(config.ple.eos_token_id));
  return Status::ok_status();
}

}  // namespace strata::cuda
