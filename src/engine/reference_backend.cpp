// The Backend over the fp32 reference forward (rollback and MTP bookkeeping in
// include/strata/engine/reference_backend.h).
#include "strata/engine/reference_backend.h"

#include <fmt/format.h>

#include "strata/engine/sampler.h"

namespace strata::engine {

AttnCacheMark AttnCacheMark::of(const reference::AttnCache& cache) {
  return {cache.n, cache.k.size(), cache.v.size(), cache.index_k.size(), cache.block_k.size()};
}

// The caches only grow at their ends (reference/attention.cpp), and a block key is a function
// of its own raw keys alone, so cutting every vector back to its earlier length is exact.
void AttnCacheMark::restore(reference::AttnCache& cache) const {
  cache.n = n;
  cache.k.resize(k);
  cache.v.resize(v);
  cache.index_k.resize(index_k);
  cache.block_k.resize(block_k);
}

StateMark StateMark::of(const reference::SequenceState& state) {
  StateMark m;
  m.n_past = state.n_past;
  m.gdn = state.gdn;
  m.ple = state.ple;
  for (const reference::AttnCache& c : state.attn) m.attn.push_back(AttnCacheMark::of(c));
  return m;
}

void StateMark::restore(reference::SequenceState& state) const {
  state.n_past = n_past;
  state.gdn = gdn;
  state.ple = ple;
  for (size_t i = 0; i < attn.size(); ++i) attn[i].restore(state.attn[i]);
}

namespace {

BackendWindow window_of(reference::ForwardOutput&& out, int64_t vocab, LogitRows rows) {
  BackendWindow w;
  w.n_rows = out.n_tok;
  for (int64_t t = 0; t < out.n_tok; ++t) {
    w.argmax.push_back(argmax(std::span<const float>(out.logits).subspan(t * vocab, vocab)));
  }
  if (rows == LogitRows::All) {
    w.logits = std::move(out.logits);
  } else if (rows == LogitRows::Last) {
    w.logits.assign(out.logits.end() - vocab, out.logits.end());
  }
  return w;
}

}  // namespace

ReferenceBackend::ReferenceBackend(const reference::Model& model, const BackendOptions& options)
    : model_(model),
      mtp_(options.mtp && model.config().plan.has_mtp()),
      mtp_all_logits_(options.mtp_all_logits),
      prefill_gdn_(options.prefill_gdn),
      sink_(options.sink),
      state_(reference::SequenceState::create(model.config())) {}

Result<reference::ForwardOutput> ReferenceBackend::run(std::span<const int32_t> tokens, reference::GdnPath gdn) {
  reference::ForwardOptions fo;
  fo.gdn = gdn;
  fo.sink = sink_;
  return reference::forward(model_, state_, tokens, fo);
}

void ReferenceBackend::keep(std::span<const int32_t> tokens, const std::vector<float>& wide, int64_t n) {
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.begin() + n);
  if (mtp_) pending_wide_.insert(pending_wide_.end(), wide.begin(), wide.begin() + n * model_.config().n_wide());
}

Result<BackendWindow> ReferenceBackend::prefill(std::span<const int32_t> tokens, LogitRows rows) {
  if (!window_.empty()) return Status::error("engine: prefill with a window not committed");
  drop_chain();
  auto out = run(tokens, prefill_gdn_);
  if (!out) return out.status();
  keep(tokens, out->wide, out->n_tok);
  return window_of(std::move(*out), n_vocab(), rows);
}

Result<BackendWindow> ReferenceBackend::forward(std::span<const int32_t> tokens, LogitRows rows) {
  if (!window_.empty()) return Status::error("engine: forward with the previous window not committed");
  if (tokens.empty() || tokens.size() > static_cast<size_t>(max_window())) {
    return Status::error(fmt::format("engine: a window holds 1 .. {} tokens, got {}", max_window(), tokens.size()));
  }
  drop_chain();
  mark_ = StateMark::of(state_);
  // Recurrent GDN: the window equals the same tokens fed one at a time, bit for bit.
  auto out = run(tokens, reference::GdnPath::Recurrent);
  if (!out) return out.status();
  window_.assign(tokens.begin(), tokens.end());
  window_wide_ = mtp_ ? std::move(out->wide) : std::vector<float>{};
  return window_of(std::move(*out), n_vocab(), rows);
}

Status ReferenceBackend::commit(int n) {
  const int t = static_cast<int>(window_.size());
  if (t == 0) return Status::error("engine: commit without a window");
  if (n < 1 || n > t) return Status::error(fmt::format("engine: commit({}) of a window of {} rows", n, t));
  if (n < t) {
    // The GDN state after n of T rows exists nowhere, so return to the mark and run them again.
    mark_.restore(state_);
    auto out = run(std::span<const int32_t>(window_).first(n), reference::GdnPath::Recurrent);
    if (!out) return out.status();
    window_wide_ = std::move(out->wide);
  }
  keep(window_, window_wide_, n);
  window_.clear();
  window_wide_.clear();
  return Status::ok_status();
}

void ReferenceBackend::drop_chain() {
  if (!mtp_) return;
  mtp_real_.restore(state_.mtp);
  chain_wide_.clear();
}

Result<std::vector<float>> ReferenceBackend::mtp_rows(std::span<const float> wide, std::span<const int32_t> next) {
  auto out = reference::forward_mtp(model_, state_, wide, next);
  if (!out) return out.status();
  const int64_t w = model_.config().n_wide();
  chain_wide_.assign(out->wide.end() - w, out->wide.end());
  return std::move(out->logits);
}

Result<std::vector<float>> ReferenceBackend::mtp_sync() {
  if (!mtp_) return Status::error("engine: this backend keeps no MTP cache");
  if (!window_.empty()) return Status::error("engine: MTP step with a window not committed");
  drop_chain();
  const int64_t w = model_.config().n_wide(), first = state_.mtp.n, count = state_.n_past - 1 - first;
  if (count <= 0) return std::vector<float>{};
  auto logits = mtp_rows({pending_wide_.data(), static_cast<size_t>(count * w)},
                         std::span<const int32_t>(tokens_).subspan(first + 1, count));
  if (!logits) return logits.status();
  pending_wide_.erase(pending_wide_.begin(), pending_wide_.begin() + count * w);
  mtp_real_ = AttnCacheMark::of(state_.mtp);
  if (!mtp_all_logits_) logits->erase(logits->begin(), logits->end() - model_.config().n_vocab);
  return logits;
}

Result<std::vector<float>> ReferenceBackend::mtp_start(int32_t next) {
  auto logits = mtp_sync();
  if (!logits) return logits.status();
  if (state_.n_past == 0) return Status::error("engine: mtp_start before any token was run");
  auto last = mtp_rows(pending_wide_, {&next, 1});
  if (!last) return last.status();
  pending_wide_.clear();
  mtp_real_ = AttnCacheMark::of(state_.mtp);
  if (!mtp_all_logits_) logits->clear();
  logits->insert(logits->end(), last->begin(), last->end());
  return logits;
}

Result<std::vector<float>> ReferenceBackend::mtp_continue(int32_t draft) {
  if (chain_wide_.empty()) return Status::error("engine: mtp_continue without mtp_start");
  std::vector<float> wide = std::move(chain_wide_);
  return mtp_rows(wide, {&draft, 1});
}

}  // namespace strata::engine
