// The MTP draft head on the GPU (spec/model.md §9; reference::forward_mtp, src/reference/mtp.cpp)
// and the bookkeeping of engine::Backend's MTP contract (include/strata/engine/backend.h, as
// src/engine/reference_backend.cpp keeps it for the CPU). A step of T rows (T = 1 .. max_window):
//   e   = RMSNorm(embed(next token); enorm)                         [T, H]
//   Xn  = RMSNorm(X; hnorm), ONE statistic over the S*H values       [T, S*H]
//   Z_s = eh_proj . [e | Xn_s] = fc_embedding e + fc_hidden Xn_s     [T, S, H] into Scratch::x
// then WindowRun::mtp_layer (the block on the MTP's own cache, its mixer, the lm_head). The
// reference applies the two halves of eh_proj to zero-padded rows and adds; one product over
// the concatenated row is the same sum in another order (fp32 rounding only).
// Each step is one graph per T between an input copy (slot base and tokens H2D, the X rows D2D)
// and the logits copy back: one host synchronisation per step.
#include <algorithm>
#include <string>
#include <vector>

#include "decoder_internal.h"
#include "strata/cuda/get_rows.h"

namespace strata::cuda {
namespace {

// Room for this many windows of committed rows before their slots are filled ahead of an
// mtp_sync() (a long prompt then never holds more than this on the device).
constexpr int kPendingWindows = 4;

// The ops of one step over T rows, reading the tokens staged in Scratch::in and the X rows in
// MtpState::x_in; leaves the logits in Scratch::logits and the last row's wide output in chain_x.
Status step_ops(Decoder::Impl& m, int T, StageObserver* obs) {
  const model::ModelConfig& c = m.config;
  const DevMtp& w = *m.w.mtp;
  MtpState& q = *m.mtp;
  const cudaStream_t st = m.stream;
  const int S = static_cast<int>(c.hc_count), H = static_cast<int>(c.n_embd);
  const int64_t W = c.n_wide();

  GetRowsArgs g;
  g.type = m.w.token_embd.type;
  g.src = m.w.token_embd.data;
  g.src_rows = m.w.token_embd.rows;
  g.cols = H;
  g.ids = m.s.tokens();
  g.n_ids = T;
  g.dst = q.emb;
  g.dst_stride = H;
  STRATA_TRY(get_rows(g, st));
  // hc_norm with one stream is a plain RMSNorm over the row (the weight carries the +1).
  STRATA_TRY(hc_norm(q.emb, w.enorm, T, 1, H, c.rms_eps, q.en, st));
  STRATA_TRY(hc_broadcast(q.en, T, S, H, q.en_wide, st));
  STRATA_TRY(hc_norm(q.x_in, w.hnorm, T, 1, static_cast<int>(W), c.rms_eps, q.xn, st));

  // Row (t, s) of cat = [en_t | xn_t,s]: T*S rows of 2H, eh_proj's input.
  const int rows = T * S;
  const size_t half = static_cast<size_t>(H) * sizeof(float), row = 2 * half;
  DECODER_CUDA_TRY(cudaMemcpy2DAsync(q.cat.f32, row, q.en_wide, half, half, static_cast<size_t>(rows),
                                     cudaMemcpyDeviceToDevice, st));
  DECODER_CUDA_TRY(cudaMemcpy2DAsync(q.cat.f32 + H, row, q.xn, half, half, static_cast<size_t>(rows),
                                     cudaMemcpyDeviceToDevice, st));
  pdl_full_dependency_next(st);  // the next kernel reads cat (launch.h)
  // Output row (t, s) of H lands at x[t, s*H]: the wide layout. mmvq takes up to
  // kMaxWindowRows rows per launch.
  const int64_t cat_cols = 2 * static_cast<int64_t>(H), q8_stride = q8_stride_for(cat_cols);
  for (int r0 = 0; r0 < rows; r0 += kMaxWindowRows) {
    Act a;
    a.f32 = q.cat.f32 + r0 * cat_cols;
    a.f32_stride = cat_cols;
    a.q8 = static_cast<uint8_t*>(q.cat.q8) + r0 * q8_stride;
    a.q8_stride = q8_stride;
    a.cols = cat_cols;
    a.T = std::min(kMaxWindowRows, rows - r0);
    if (takes_q8(w.eh_proj)) STRATA_TRY(quantize_act(a, st));
    STRATA_TRY(linear(w.eh_proj, a, m.s.x + static_cast<int64_t>(r0) * H, H, st));
  }
  if (obs) STRATA_TRY(obs->stage("mtp_input", w.block.index, m.s.x, W, T));

  STRATA_TRY(m.run_mtp_layer(T, obs));
  DECODER_CUDA_TRY(cudaMemcpyAsync(q.chain_x, m.s.x + (T - 1) * W, static_cast<size_t>(W) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, st));
  pdl_full_dependency_next(st);
  return Status::ok_status();
}

// One step of next.size() rows at slots q.n ..: X rows from x_rows (device), logits appended to
// `out`. The slots past the cache's end are refused (the trunk window after them would be too).
Status run_step(Decoder::Impl& m, std::span<const int32_t> next, const float* x_rows, std::vector<float>& out,
                const reference::StageSink* sink) {
  MtpState& q = *m.mtp;
  const int T = static_cast<int>(next.size());
  const int64_t W = m.config.n_wide(), V = m.config.n_vocab;
  if (q.n + T > m.options.max_ctx)
    return Status::error("cuda decoder: MTP cache full: slots " + std::to_string(q.n) + " + " + std::to_string(T) +
                         " > max_ctx " + std::to_string(m.options.max_ctx));
  auto* in = reinterpret_cast<WindowInputs*>(q.inputs.get());
  in->pos = q.n;
  std::copy(next.begin(), next.end(), in->tokens);
  DECODER_CUDA_TRY(cudaMemcpyAsync(m.s.in, in, sizeof(WindowInputs), cudaMemcpyHostToDevice, m.stream));
  DECODER_CUDA_TRY(cudaMemcpyAsync(q.x_in, x_rows, static_cast<size_t>(T * W) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, m.stream));
  pdl_full_dependency_next(m.stream);  // the step's first kernels read them (launch.h)
  if (sink && *sink) {
    SinkObserver obs(m.stream, q.n, *sink);
    STRATA_TRY(step_ops(m, T, &obs));
  } else if (m.options.graphs) {
    auto& g = q.graphs[T];
    if (!g) {
      auto captured = Graph::capture(m.stream, [&] { return step_ops(m, T, nullptr); });
      if (!captured) {
        q.graphs.erase(T);
        return captured.status();
      }
      g = std::move(*captured);
    }
    STRATA_TRY(g->launch(m.stream));
  } else {
    STRATA_TRY(step_ops(m, T, nullptr));
  }
  // Without mtp_all_logits only the newest row is kept: out stays one row however many slots fill.
  const int64_t rows = m.options.mtp_all_logits ? T : 1;
  const size_t at = m.options.mtp_all_logits ? out.size() : 0;
  out.resize(at + static_cast<size_t>(rows * V));
  DECODER_CUDA_TRY(cudaMemcpyAsync(out.data() + at, m.s.logits + (T - rows) * V, static_cast<size_t>(rows * V) * sizeof(float),
                                   cudaMemcpyDeviceToHost, m.stream));
  DECODER_CUDA_TRY(cudaStreamSynchronize(m.stream));
  q.n += T;
  return Status::ok_status();
}

// Fills the slots of the first k pending rows with their next tokens (the chain's speculative
// slots are dropped first) and removes those rows; the slots become trunk-fed.
Status fill_pending(Decoder::Impl& m, int k, std::span<const int32_t> next, std::vector<float>& out,
                    const reference::StageSink* sink) {
  MtpState& q = *m.mtp;
  const int64_t W = m.config.n_wide();
  const int tmax = m.options.max_window;
  q.n = q.n_real;
  for (int r0 = 0; r0 < k; r0 += tmax) {
    const int t = std::min(tmax, k - r0);
    STRATA_TRY(run_step(m, next.subspan(static_cast<size_t>(r0), static_cast<size_t>(t)), q.pending_x + r0 * W, out,
                        sink));
  }
  // Row by row in order: with k >= 1 no copy reads a row an earlier copy of this loop wrote.
  const int rest = q.pending_rows - k;
  for (int i = 0; i < rest; ++i)
    DECODER_CUDA_TRY(cudaMemcpyAsync(q.pending_x + i * W, q.pending_x + (k + i) * W, static_cast<size_t>(W) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, m.stream));
  pdl_full_dependency_next(m.stream);
  q.pending_tokens.erase(q.pending_tokens.begin(), q.pending_tokens.begin() + k);
  q.pending_rows = rest;
  q.n_real = q.n;
  q.chain = true;
  return Status::ok_status();
}

// Moves the committed rows of the recorded window into the pending rows. When they would not
// fit, every pending slot is filled first (their next tokens are all known by then) and its
// logits kept for the next mtp_sync().
Status absorb(Decoder::Impl& m) {
  MtpState& q = *m.mtp;
  if (q.window_pos < 0) return Status::ok_status();
  const int64_t kept = m.pos - q.window_pos;
  if (kept < 1 || kept > q.window_rows)
    return Status::error("cuda decoder: MTP: the window recorded at position " + std::to_string(q.window_pos) + " (" +
                         std::to_string(q.window_rows) + " rows) does not match n_past " + std::to_string(m.pos) +
                         ": commit() it, and call mtp_window() after every forward()");
  if (q.pending_rows > 0 && q.pending_rows + kept > q.pending_cap) {
    std::vector<int32_t> next(q.pending_tokens.begin() + 1, q.pending_tokens.end());
    next.push_back(q.window_tokens.front());
    STRATA_TRY(fill_pending(m, q.pending_rows, next, q.drained, nullptr));
  }
  const int64_t W = m.config.n_wide();
  DECODER_CUDA_TRY(cudaMemcpyAsync(q.pending_x + q.pending_rows * W, q.window_x[q.window_buf],
                                   static_cast<size_t>(kept * W) * sizeof(float), cudaMemcpyDeviceToDevice, m.stream));
  pdl_full_dependency_next(m.stream);
  q.pending_tokens.insert(q.pending_tokens.end(), q.window_tokens.begin(), q.window_tokens.begin() + kept);
  q.pending_rows += static_cast<int>(kept);
  q.window_pos = -1;
  return Status::ok_status();
}

Status check_ready(const Decoder::Impl& m, const char* call) {
  if (!m.mtp) return Status::error(std::string("cuda decoder: ") + call + ": no MTP head (DecoderOptions::mtp on a model with an MTP block)");
  if (m.pending_rows != 0) return Status::error(std::string("cuda decoder: ") + call + ": commit() the window first");
  return Status::ok_status();
}

Status check_id(const Decoder::Impl& m, int32_t id, const char* call) {
  if (id < 0 || static_cast<uint32_t>(id) >= m.config.n_vocab)
    return Status::error(std::string("cuda decoder: ") + call + ": token id " + std::to_string(id) +
                         " out of range (expected 0 <= id < " + std::to_string(m.config.n_vocab) + ")");
  return Status::ok_status();
}

}  // namespace

Status Decoder::Impl::allocate_mtp() {
  mtp = std::make_unique<MtpState>();
  MtpState& q = *mtp;
  const model::ModelConfig& c = config;
  const DevBlock& blk = w.mtp->block;
  const int tmax = options.max_window;
  const int64_t H = c.n_embd, W = c.n_wide(), kv = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  q.pending_cap = kPendingWindows * tmax;
  AttnCacheView cache;
  const auto carve = [&](Carver& cv) {
    q.window_x[0] = cv.take<float>(tmax * W);
    q.window_x[1] = cv.take<float>(tmax * W);
    q.pending_x = cv.take<float>(q.pending_cap * W);
    q.x_in = cv.take<float>(tmax * W);
    q.chain_x = cv.take<float>(W);
    q.emb = cv.take<float>(tmax * H);
    q.en = cv.take<float>(tmax * H);
    q.en_wide = cv.take<float>(tmax * W);
    q.xn = cv.take<float>(tmax * W);
    q.cat.carve(cv, 2 * H, tmax * static_cast<int>(c.hc_count));
    // The MTP block's own K/V and index caches, laid out as a trunk attention slot's.
    cache.k = cv.take<float>(cache_ctx * kv);
    cache.v = cv.take<float>(cache_ctx * kv);
    if (blk.iq) {
      cache.index_k = cv.take<float>(cache_ctx * c.indexer_head_dim);
      cache.block_k = cv.take<float>(cache_ctx / blk.plan.compress_ratio * c.indexer_head_dim);
    }
  };
  Carver size(nullptr);
  carve(size);
  STRATA_TRY(q.memory.alloc(size.used(), "the MTP head's cache and buffers (max_ctx " + std::to_string(options.max_ctx) + ")"));
  Carver real(q.memory.get());
  carve(real);
  if (static_cast<size_t>(blk.plan.slot) != attn.size())
    return Status::error("cuda decoder: the MTP block's cache slot " + std::to_string(blk.plan.slot) +
                         " does not follow the trunk's " + std::to_string(attn.size()) + " attention slots");
  attn.push_back(cache);
  return q.inputs.alloc(sizeof(WindowInputs), "the MTP step inputs");
}

Status Decoder::Impl::zero_mtp() {
  MtpState& q = *mtp;
  DECODER_CUDA_TRY(cudaMemsetAsync(q.memory.get(), 0, static_cast<size_t>(q.memory.bytes()), stream));
  q.n_real = 0;
  q.n = 0;
  q.pending_rows = 0;
  q.pending_tokens.clear();
  q.window_pos = -1;
  q.window_rows = 0;
  q.window_tokens.clear();
  q.chain = false;
  q.drained.clear();
  return Status::ok_status();
}

bool Decoder::has_mtp() const { return impl_->mtp != nullptr; }

Status Decoder::mtp_window() {
  Impl& m = *impl_;
  if (!m.mtp) return Status::error("cuda decoder: mtp_window: no MTP head (DecoderOptions::mtp on a model with an MTP block)");
  if (m.pending_rows == 0) return Status::error("cuda decoder: mtp_window: no window awaits commit (call it after forward())");
  MtpState& q = *m.mtp;
  if (q.window_pos == m.pos) return Status::error("cuda decoder: mtp_window: this window is already recorded");
  DECODER_CUDA_TRY(cudaSetDevice(m.options.device));
  // Copy x before absorb() may run MTP steps (they overwrite x), into the buffer not in use.
  const int buf = q.window_pos >= 0 ? 1 - q.window_buf : q.window_buf;
  const int64_t W = m.config.n_wide();
  DECODER_CUDA_TRY(cudaMemcpyAsync(q.window_x[buf], m.s.x, static_cast<size_t>(m.pending_rows * W) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, m.stream));
  pdl_full_dependency_next(m.stream);
  STRATA_TRY(absorb(m));
  q.n = q.n_real;  // the window replaces any chain: its speculative slots go
  q.chain = false;
  q.window_pos = m.pos;
  q.window_rows = m.pending_rows;
  q.window_buf = buf;
  q.window_tokens = m.pending_tokens;
  return Status::ok_status();
}

namespace {

// What mtp_sync() and mtp_start() share: the recorded window absorbed, its coverage checked, the
// chain's speculative slots dropped; returns the logits of slots filled ahead (oldest first).
Result<std::vector<float>> begin_fill(Decoder::Impl& m, const char* call) {
  MtpState& q = *m.mtp;
  STRATA_TRY(absorb(m));
  if (q.n_real + q.pending_rows != m.pos)
    return Status::error(std::string("cuda decoder: ") + call + ": the MTP input covers positions up to " +
                         std::to_string(q.n_real + q.pending_rows) + ", n_past is " + std::to_string(m.pos) +
                         " (call mtp_window() after every forward())");
  q.n = q.n_real;
  q.chain = false;
  std::vector<float> out = std::move(q.drained);
  q.drained.clear();
  return out;
}

}  // namespace

Result<std::vector<float>> Decoder::mtp_sync(const reference::StageSink* sink) {
  Impl& m = *impl_;
  STRATA_TRY(check_ready(m, "mtp_sync"));
  DECODER_CUDA_TRY(cudaSetDevice(m.options.device));
  auto out = begin_fill(m, "mtp_sync");
  if (!out) return out.status();
  MtpState& q = *m.mtp;
  if (q.pending_rows > 1) {
    const std::vector<int32_t> next(q.pending_tokens.begin() + 1, q.pending_tokens.end());
    STRATA_TRY(fill_pending(m, q.pending_rows - 1, next, *out, sink));
  }
  return out;
}

// mtp_sync()'s slots and slot n_past - 1 in the same steps (one step when they fit a window).
Result<std::vector<float>> Decoder::mtp_start(int32_t next, const reference::StageSink* sink) {
  Impl& m = *impl_;
  STRATA_TRY(check_ready(m, "mtp_start"));
  STRATA_TRY(check_id(m, next, "mtp_start"));
  DECODER_CUDA_TRY(cudaSetDevice(m.options.device));
  auto out = begin_fill(m, "mtp_start");
  if (!out) return out.status();
  MtpState& q = *m.mtp;
  if (q.pending_rows < 1)
    return Status::error("cuda decoder: mtp_start: no trunk row for slot n_past - 1 (no token run yet, or a second "
                         "mtp_start without a forward() between)");
  std::vector<int32_t> tokens(q.pending_tokens.begin() + 1, q.pending_tokens.end());
  tokens.push_back(next);
  STRATA_TRY(fill_pending(m, q.pending_rows, tokens, *out, sink));
  return out;
}

Result<std::vector<float>> Decoder::mtp_continue(int32_t draft, const reference::StageSink* sink) {
  Impl& m = *impl_;
  STRATA_TRY(check_ready(m, "mtp_continue"));
  STRATA_TRY(check_id(m, draft, "mtp_continue"));
  MtpState& q = *m.mtp;
  if (!q.chain) return Status::error("cuda decoder: mtp_continue without mtp_start (or after a forward())");
  DECODER_CUDA_TRY(cudaSetDevice(m.options.device));
  std::vector<float> out;
  STRATA_TRY(run_step(m, std::span<const int32_t>(&draft, 1), q.chain_x, out, sink));
  return out;
}

}  // namespace strata::cuda
