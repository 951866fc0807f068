// The Backend over the fp32 reference forward (src/reference).
//
// Windows run with the recurrent GDN form, so a window of T rows computes bit for bit what T
// single-token steps compute (include/strata/reference/forward.h): greedy output with and
// without speculation is then identical, not merely close. The prompt runs in one pass with
// BackendOptions::prefill_gdn (Auto: chunked, as transformers' prefill).
//
// Rollback: forward() marks the state first (a copy of the fixed-size GDN and PLE state, the
// lengths of the append-only KV, index-key and block-key caches). commit(T) keeps everything;
// commit(n < T) restores the mark (copy back, truncate the caches) and runs the n rows again,
// which recomputes exactly the state those rows alone give.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/engine/backend.h"
#include "strata/reference/forward.h"
#include "strata/reference/state.h"

namespace strata::engine {

// The lengths of an append-only attention cache, to cut it back to.
struct AttnCacheMark {
  int64_t n = 0;
  size_t k = 0, v = 0, index_k = 0, block_k = 0;

  static AttnCacheMark of(const reference::AttnCache& cache);
  void restore(reference::AttnCache& cache) const;
};

// Enough of a SequenceState to return to it after more tokens were appended.
struct StateMark {
  int64_t n_past = 0;
  std::vector<reference::GdnState> gdn;
  reference::PleState ple;
  std::vector<AttnCacheMark> attn;

  static StateMark of(const reference::SequenceState& state);
  void restore(reference::SequenceState& state) const;
};

class ReferenceBackend final : public Backend {
 public:
  ReferenceBackend(const reference::Model& model, const BackendOptions& options);

  std::string name() const override { return "fp32 reference"; }
  int64_t n_vocab() const override { return model_.config().n_vocab; }
  int max_window() const override { return 8; }
  int64_t n_past() const override { return state_.n_past; }

  Result<BackendWindow> prefill(std::span<const int32_t> tokens, LogitRows rows) override;
  Result<BackendWindow> forward(std::span<const int32_t> tokens, LogitRows rows) override;
  Status commit(int n) override;

  bool has_mtp() const override { return mtp_; }
  Result<std::vector<float>> mtp_sync() override;
  Result<std::vector<float>> mtp_start(int32_t next) override;
  Result<std::vector<float>> mtp_continue(int32_t draft) override;

  const reference::SequenceState& state() const { return state_; }

 private:
  Result<reference::ForwardOutput> run(std::span<const int32_t> tokens, reference::GdnPath gdn);
  void keep(std::span<const int32_t> tokens, const std::vector<float>& wide, int64_t n);
  void drop_chain();
  Result<std::vector<float>> mtp_rows(std::span<const float> wide, std::span<const int32_t> next);

  const reference::Model& model_;
  bool mtp_;
  bool mtp_all_logits_;
  reference::GdnPath prefill_gdn_;
  const reference::StageSink* sink_;
  reference::SequenceState state_;

  // The open window: its tokens, wide rows and the mark to return to.
  std::vector<int32_t> window_;
  std::vector<float> window_wide_;
  StateMark mark_;

  // MTP bookkeeping: committed tokens (slot t needs the token at t + 1), the trunk's wide rows
  // of committed positions not yet in the MTP cache (positions mtp_real_ ..), the cache length
  // that holds only trunk-fed slots, and the head's wide output that a chain continues from.
  std::vector<int32_t> tokens_;
  std::vector<float> pending_wide_;
  AttnCacheMark mtp_real_;
  std::vector<float> chain_wide_;
};

}  // namespace strata::engine
