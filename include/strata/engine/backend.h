// What the generation loop drives: a trunk that runs a window of T = 1 .. max_window() tokens
// and keeps any prefix of it, and (where there is one) the MTP draft head.
//
//   prefill(prompt)           the prompt, committed
//   forward([x, d1 .. dk])    rows for positions n_past() .. n_past() + k
//   commit(m + 1)             keep the first m + 1 rows: every state (GDN recurrent and conv,
//                             PLE history, KV and index keys, n_past) equals that after a
//                             window of those rows alone
//   mtp_start(x), mtp_continue(d) ...   a draft chain (has_mtp() only)
//
// Two implementations: the fp32 reference (reference_backend.h) and the CUDA decoder
// (cuda::create_engine_backend, built only with CUDA), both with the MTP head.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/reference/gdn.h"
#include "strata/reference/model.h"
#include "strata/reference/stage.h"

namespace strata::engine {

enum class LogitRows { None, Last, All };

struct BackendWindow {
  int64_t n_rows = 0;
  std::vector<int32_t> argmax;  // [n_rows]: each row's largest logit, lowest id among equals
  std::vector<float> logits;    // [n_rows, n_vocab] (All), [1, n_vocab] (Last) or empty (None)
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;   // for the stats line: "fp32 reference", "cuda"
  virtual int64_t n_vocab() const = 0;
  virtual int max_window() const = 0;     // largest T forward() takes (<= 8)
  virtual int64_t n_past() const = 0;     // committed tokens

  // Runs and commits the whole prompt (in as many windows as it needs).
  virtual Result<BackendWindow> prefill(std::span<const int32_t> tokens, LogitRows rows) = 0;
  // Runs T tokens at n_past() ..; commit() must follow before the next forward().
  virtual Result<BackendWindow> forward(std::span<const int32_t> tokens, LogitRows rows) = 0;
  // Keeps the first n (1 .. T) rows of the last forward().
  virtual Status commit(int n) = 0;

  virtual bool has_mtp() const = 0;
  // Fills the MTP cache for every committed position whose next token is committed too
  // (slots .. n_past() - 2) and returns their draft logits, oldest first ([rows, n_vocab]; with
  // BackendOptions::mtp_all_logits off, at most the last row).
  virtual Result<std::vector<float>> mtp_sync() = 0;
  // mtp_sync(), then slot n_past() - 1 with `next`, the token at n_past() (chosen, not yet run).
  // Returns the logits of every slot filled (only the last without mtp_all_logits); the last
  // row drafts the token after `next`.
  // Drops the slots of any earlier chain first.
  virtual Result<std::vector<float>> mtp_start(int32_t next) = 0;
  // One more chain step on the head's own wide output with `draft` (the token after the
  // previous step's): logits [1, n_vocab] for the token after `draft`. These slots are
  // speculative and are dropped by the next mtp_start() or forward().
  virtual Result<std::vector<float>> mtp_continue(int32_t draft) = 0;
};

enum class Device { Cpu, Cuda };

struct BackendOptions {
  Device device = Device::Cpu;
  bool mtp = false;                                   // keep the MTP cache (drafts or --mtp-logits-out)
  // mtp_sync / mtp_start return the logits of every slot they fill (recording, --mtp-logits-out);
  // off, only the last row (what drafting reads), so a long prompt's first draft does not hold
  // prompt x n_vocab floats on the host.
  bool mtp_all_logits = false;
  reference::GdnPath prefill_gdn = reference::GdnPath::Auto;  // reference only: the prompt's GDN form
  int64_t max_ctx = 4096;                             // cuda only: KV capacity
  // reference only: the trunk forward's stage sink (`strata bench` meters time and bytes with
  // it); the MTP head does not report to it.
  const reference::StageSink* sink = nullptr;
};

// The reference backend for Device::Cpu; Device::Cuda gives the "built without CUDA" error
// (a CUDA build's CLI takes cuda::create_engine_backend instead).
Result<std::unique_ptr<Backend>> create_backend(const reference::Model& model, const BackendOptions& options);

}  // namespace strata::engine
