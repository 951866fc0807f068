// `strata bench --device cuda`: the CUDA decoder (strata/cuda/decoder.h) timed window by window,
// with the bytes each window must read computed from the bound weights (the decoder has no
// stage sink to count them), the GPU's measured read roof, a sweep of window sizes T and one
// profiled window per T. The pure parts (bytes, slope, projection) are here and always built;
// run_cuda_bench exists only in CUDA builds (cuda_built()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/bench/meter.h"
#include "strata/model/config.h"
#include "strata/model/weights.h"

namespace strata::bench {

// The per-draft acceptance the sweep's projection assumes (a = 0.75).
inline constexpr double kProjectedAcceptance = 0.75;

// One stage of Decoder::profile(): its time in one window and share of the window's sum.
struct CudaStage {
  std::string stage;
  double ms = 0.0;
  int launches = 0;
  double share = 0.0;
};

// Decode at one window size T: timed windows (forward + commit, after one untimed warm-up
// window), the bytes they read, and one profiled window.
struct CudaWindowRun {
  int window = 1;
  int64_t ctx_start = 0;              // tokens cached before the first timed window
  int64_t windows = 0;                // timed windows
  int64_t tokens = 0;                 // tokens they emitted (accepted drafts + 1 each)
  double decode_s = 0.0;              // sum of the timed windows' wall time
  std::vector<double> window_ms;      // every timed window
  double window_ms_median = 0.0;
  double ms_per_token = 0.0;          // decode_s / tokens
  double tok_s = 0.0;                 // tokens / decode_s
  ByteCounts bytes;                   // read by the timed windows (computed, see window_bytes)
  double bytes_per_token = 0.0;
  double roof_fraction = 0.0;         // bytes_per_token * tok_s / roof
  double experts_per_block = 0.0;     // distinct routed experts per block per window (T > 1: bound)
  double expected_tokens = 0.0;       // sum_{i<T} a^i, a = kProjectedAcceptance
  double projected_tok_s = 0.0;       // expected_tokens / window_ms_median
  std::vector<CudaStage> profile;     // one Decoder::profile() window of T rows
  double profile_ms = 0.0;            // the sum of its stages
};

// What the CUDA device run adds to the Report (its JSON "cuda" object).
struct CudaSection {
  std::string gpu;                    // device name
  std::string compute_capability;     // "9.0"
  int sm_count = 0;
  uint64_t vram_total_bytes = 0;
  uint64_t vram_used_bytes = 0;       // total - free after the runs (context included)
  int64_t max_ctx = 0;                // the decoder's cache capacity
  int max_window = 0;
  int64_t weight_bytes = 0;           // DecoderStats: resident weights
  int64_t state_bytes = 0;            // KV, index, GDN, PLE state and scratch
  int64_t graph_nodes = 0;            // nodes of the T = 1 graph
  double upload_s = 0.0;              // Decoder::create, fill and upload included
  bool weights_generated = false;     // filled from synth::generate (shape-only pack)
  double roof_probe_gib = 0.0;
  int prefill_window = 0;             // rows per prefill window (max_window)
  CudaWindowRun decode;               // the run at --window
  std::vector<CudaWindowRun> sweep;   // one per --window-sweep T
  // Least squares of the sweep's median window ms against T: ms = intercept + slope * T.
  double slope_ms_per_row = 0.0;
  double intercept_ms = 0.0;
};

// The bytes one decode window of T rows reads from VRAM, when `n_before` tokens are cached:
//   dense   every weight of the trunk blocks but the routed experts, plus the final mixer and
//           the head (stored bytes; the MTP block is not run);
//   embed   one token_embd row per row;
//   experts per trunk block min(T * n_expert_used, n_expert) experts' gate/up/down (exact for
//           T = 1; for T > 1 it assumes the rows pick distinct experts: an upper bound);
//   kv      per attention block the fp32 K/V rows attention reads (every cached token while
//           QSA is dense, else top_blocks * ratio + the tail per row, capped at the cache) and
//           the complete blocks' pooled keys;
//   state   per GDN block the fp32 recurrent state read and written, 2 x 4 x n_v_heads x d x d.
// The n-gram table is read on the host (ngram = 0); activations are not counted.
ByteCounts window_bytes(const model::ModelConfig& config, const model::Weights& weights, int64_t n_before, int t);

// Expected tokens a window of T emits when each draft is accepted with probability a and a
// rejection ends the window: sum_{i=0}^{T-1} a^i.
double expected_window_tokens(int t, double a);

// Least-squares line through (x, y): {slope, intercept}; slope 0 with fewer than two distinct x.
struct Line {
  double slope = 0.0;
  double intercept = 0.0;
};
Line least_squares(const std::vector<double>& x, const std::vector<double>& y);

// Fills the derived fields of a run (median, per token, tok/s, roof, projection) from its
// window_ms, tokens and bytes; roof in bytes per second.
void finish_window_run(CudaWindowRun& run, double roof_bytes_s);

// Profile stages with their shares of the window's sum.
std::vector<CudaStage> with_shares(std::vector<CudaStage> stages);

}  // namespace strata::bench
