// One measured run at one context: prefill ctx prompt tokens, then decode gen tokens in
// windows of T, with the StageMeter on the forward's stage sink.
//
// Windows (DESIGN "One verify window"): a window feeds T tokens at consecutive positions, the
// last accepted token plus T-1 drafts, in one forward call; k drafts are accepted, so k+1
// tokens are emitted and the state must hold exactly those k+1 positions. The reference
// state cannot be rolled back in place, so when k+1 < T the bench restores a snapshot taken
// before the window and replays the k+1 accepted tokens ("commit"); that time and those bytes
// are part of decode, as the engine's commit replay is.
//
// --forced: the prompt and every window's tokens come from a seeded PRNG over the vocab (the
// drafts are the stream's next tokens) and k follows the fixed --accept schedule, so two arms
// (builds, levers, window sizes) see identical work without a trained model. Without
// --forced the prompt is the same stream but decode is greedy (argmax of the logits), T = 1.
//
// --spec N (not with --forced): decode is engine::generate on the reference backend, greedy,
// drafts from --spec-source (MTP head, prompt lookup or auto), up to N per window; the
// backend's own rollback replays rejected rows, metered as "commit". Greedy tokens are the
// same as without --spec (the reference's windows are exact), so output_fnv1a matches the
// plain greedy run's. Every run carries engine::SpecStats: for --spec the drafter's counts,
// for --forced the counts the schedule implies (T - 1 drafted, k accepted per window), for
// plain decode W windows and nothing drafted. Always tokens_generated = windows + accepted.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/bench/meter.h"
#include "strata/bench/options.h"
#include "strata/common/status.h"
#include "strata/engine/generate.h"
#include "strata/engine/speculator.h"
#include "strata/reference/model.h"

namespace strata::bench {

struct RunResult {
  int64_t ctx = 0;
  int64_t gen = 0;                    // requested
  int64_t tokens_generated = 0;       // emitted (a last window may emit more than requested)
  int64_t windows = 0;                // verify forwards
  int64_t replays = 0;                // commit replays (windows with rejected drafts)
  double prefill_s = 0.0, decode_s = 0.0;
  double prefill_tok_s = 0.0, decode_tok_s = 0.0;
  std::vector<double> window_s;       // wall time of each window, verify + commit
  ByteCounts decode_bytes;            // everything read during decode (verify + commit)
  double bytes_per_token = 0.0;       // decode_bytes.total() / tokens_generated
  double experts_per_block = 0.0;     // mean distinct routed experts per block per forward
  double roof_fraction = 0.0;         // set by finish_run(): bytes_per_token * decode_tok_s / bandwidth
  double instrumentation_s = 0.0;     // time inside the meter (included in prefill_s / decode_s)
  // Process CPU seconds (all threads) during prefill / decode. cpu_s / (wall s x threads) is
  // the share of its threads' time the bench was on a CPU: below ~0.9 other load competed.
  double prefill_cpu_s = 0.0, decode_cpu_s = 0.0;
  StageTimes prefill_stages, decode_stages, commit_stages;
  uint64_t prompt_hash = 0;           // FNV-1a of the prompt ids
  uint64_t output_hash = 0;           // FNV-1a of the emitted ids
  std::vector<int32_t> output_head;   // the first emitted ids (at most 32), for eyes
  engine::SpecStats spec;             // windows, drafted, accepted (see above)
};

struct RunConfig {
  int64_t ctx = 256, gen = 16, prefill_chunk = 512;
  int window = 1;
  std::vector<int> accept;            // cycled; empty: T - 1
  bool forced = false;
  uint64_t seed = 0x5EED;
  int spec = 0;                       // --spec N: drafts per window through engine::generate (0 = off)
  engine::DraftSource spec_source = engine::DraftSource::Auto;
  // (label, done, total): called after each prefill chunk and each window.
  std::function<void(std::string_view, int64_t, int64_t)> progress;
};

RunConfig run_config(const Options& options, int64_t ctx);

// --spec-source as the engine's enum ("" and "auto": Auto).
engine::DraftSource draft_source(const std::string& name);

// The counts a --forced schedule implies for `windows` windows of T tokens: T - 1 drafted and
// accepted_drafts(accept, T, w) kept in window w.
engine::SpecStats forced_spec_stats(const std::vector<int>& accept, int window, int64_t windows);

Result<RunResult> run_once(const reference::Model& model, const RunConfig& config);

// roof_fraction = bytes_per_token * decode_tok_s / bandwidth (bytes per second).
void finish_run(RunResult& run, double bandwidth_bytes_s);

// decode_cpu_s / (decode_s x threads): 1 when every thread ran the whole time.
double decode_cpu_share(const RunResult& run, int threads);

}  // namespace strata::bench
