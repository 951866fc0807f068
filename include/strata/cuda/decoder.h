// The CUDA decoder: the whole qwen4exp trunk on one GPU for windows of T = 1..8 rows (plain
// decode is T = 1; verify windows are T > 1), every weight resident in VRAM, the n-gram table
// read on the host. One CUDA graph per window size, captured on first use and replayed with its
// inputs (tokens, positions, the n-gram rows) in device memory; no host synchronisation inside a
// window. Host-only header: no CUDA types.
//
//   auto dec = cuda::Decoder::create(model.config(), model.weights(), {});
//   auto w = (*dec)->forward(prompt_chunk);      // up to max_window tokens per call
//   (*dec)->commit(w->n_rows);                   // keep every row (or fewer: rollback)
//
// Stage names and order are the reference forward's (include/strata/reference/stage.h), so
// `strata parity` compares a window stage by stage with reference::forward.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/model/config.h"
#include "strata/model/weights.h"
#include "strata/reference/stage.h"

namespace strata::cuda {

// Where a tensor's bytes come from when not from the mapped file: the synthetic packs fill
// [offset, offset + n) of a tensor's bytes on demand (synth::generate), so a full-geometry
// bench needs no file on disk.
using WeightFill = std::function<Status(const model::Tensor& tensor, uint64_t offset, uint64_t n, uint8_t* dst)>;

struct DecoderOptions {
  int device = 0;
  int64_t max_ctx = 4096;       // KV / index cache capacity in tokens
  int max_window = 8;           // largest T (1 .. 8)
  bool graphs = true;           // capture and replay one graph per T
  int upload_threads = 0;       // host threads filling upload staging (0: hardware threads)
  bool mtp = false;             // upload the MTP draft head (when the model has one) and keep its cache
  bool mtp_all_logits = false;  // mtp_* return every filled slot's logits; off: only the last row
};

struct WindowOutput {
  int n_rows = 0;
  std::vector<int32_t> argmax;  // [T]: the lowest id of each row's largest logit
  std::vector<float> logits;    // [T, n_vocab] when asked for
  std::vector<float> wide;      // [T, S*H] the pre-mixer residual (the MTP input) when asked for
};

struct WindowRequest {
  bool logits = false;
  bool wide = false;
  const reference::StageSink* sink = nullptr;  // stage dumps (runs without a graph, synchronises per stage)
};

// Time of one window split by stage kind, from CUDA events between stages (profile()).
struct StageTime {
  std::string stage;            // embed, ple, hc_mix, gdn, qsa, hc_combine, router, experts, shared, head
  double ms = 0.0;
  int launches = 0;
};

struct DecoderStats {
  int64_t weight_bytes = 0;     // resident weights
  int64_t state_bytes = 0;      // KV, index, GDN, PLE state and scratch
  int64_t graph_nodes = 0;      // nodes of the T = 1 graph (0 before it is captured)
  int64_t upload_ms = 0;
};

class Decoder {
 public:
  // With PLE the n-gram table stays on the host and its rows are read every window, so
  // `weights` (with the file it maps) and `fill` must outlive the Decoder. Errors name the
  // unsupported tensor/field, or what could not be allocated and its size.
  static Result<std::unique_ptr<Decoder>> create(const model::ModelConfig& config, const model::Weights& weights,
                                                 const DecoderOptions& options, const WeightFill& fill = {});
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // An empty sequence (every state zeroed, position 0).
  Status reset();
  int64_t n_past() const;

  // Rows for tokens at positions n_past() .. n_past() + T - 1 (T = tokens.size(), 1 .. max_window).
  // The state advances by T rows; call commit() before the next forward(). After a failed
  // forward() or commit() the state is undefined until reset().
  Result<WindowOutput> forward(std::span<const int32_t> tokens, const WindowRequest& request = {});
  // Keeps the first n (1 .. T) rows of the last window: n_past() = previous + n, and the GDN,
  // conv, PLE and KV state equal those after a window of those n rows alone.
  Status commit(int n);

  // forward() run stage by stage with CUDA events between stages (no graph), for the bench's
  // profile of where the time goes; commit() after it as after forward().
  Result<std::vector<StageTime>> profile(std::span<const int32_t> tokens);

  DecoderStats stats() const;

  // The MTP draft head (spec/model.md §9), with DecoderOptions::mtp on a model that has one. The
  // three calls keep engine::Backend's contract (include/strata/engine/backend.h): mtp_sync()
  // fills the MTP cache for committed positions whose next token is committed too, mtp_start()
  // then slot n_past() - 1 with `next`, mtp_continue() one speculative chain step on the head's
  // own wide output; each returns the draft logits of the slots it filled ([rows, n_vocab]),
  // oldest first. mtp_window() must follow every forward() (before commit()): it keeps that
  // window's pre-mixer wide rows on the device, and the rows commit() keeps become the MTP input
  // at the next MTP call. A forward() drops the chain's speculative slots. With a sink the MTP
  // steps run without a graph and report the reference's stages (mtp_input, the block's, mtp_mix,
  // mtp_head).
  bool has_mtp() const;
  Status mtp_window();
  Result<std::vector<float>> mtp_sync(const reference::StageSink* sink = nullptr);
  Result<std::vector<float>> mtp_start(int32_t next, const reference::StageSink* sink = nullptr);
  Result<std::vector<float>> mtp_continue(int32_t draft, const reference::StageSink* sink = nullptr);

  struct Impl;
 private:
  explicit Decoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::cuda
