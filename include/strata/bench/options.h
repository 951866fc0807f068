// What `strata bench` is asked to measure, checked once at the edge (DESIGN principle 6).
// Every message reads "strata bench: <option>: <what> (expected X, got Y)", so a wrong
// command line says which flag to fix; the CLI and the unit tests share this one check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"

namespace strata::bench {

// The verify window the engine supports (DESIGN "One verify window": T = 1 to 8).
inline constexpr int kMaxWindow = 8;
// --spec N: drafts per window, as `strata run --spec` (engine::kMaxDrafts).
inline constexpr int kMaxSpecDrafts = kMaxWindow - 1;

struct Options {
  // The model: a GGUF file (any shard of a split set) or a synthetic pack made in memory.
  std::string model_path;
  std::string synth_recipe;               // q2_0, iq2_xs, iq3_xxs, iq3_s, ud_q4_k_xl
  std::optional<uint32_t> layers;         // --synth only; default kSynthDefaultLayers
  std::optional<uint32_t> experts;        // --synth only; default 512
  uint64_t synth_seed = 1;
  std::string synth_dir;                  // write the pack here (kept) instead of RAM-backed storage
  std::string ram_dir = "/dev/shm";       // the tmpfs for the in-memory pack

  std::string device = "cpu";
  int threads = 0;                        // 0: one per hardware thread

  int64_t ctx = 256;                      // prompt tokens before decode (the context decode runs at)
  int64_t gen = 16;                       // tokens to generate
  std::vector<int64_t> sweep_ctx;         // when set, one run per context instead of --ctx
  int64_t prefill_chunk = 512;            // prompt tokens per forward call (bounds activations)

  int window = 1;                         // T tokens verified per forward (1 = plain decode)
  std::vector<int> window_sweep;          // --device cuda: also time windows of each T (needs --forced)
  std::vector<int> accept;                // drafts accepted per window, cycled; default T - 1
  bool forced = false;                    // fixed token stream and acceptances (deterministic)
  // --spec N: decode through engine::generate, greedy, with up to N drafts per verify window
  // (0 = off); acceptances are the model's own, so it excludes --forced. docs/BENCH.md
  // §Speculation.
  int spec = 0;
  std::string spec_source;                // mtp, lookup or auto; empty: auto (only with --spec > 0)
  uint64_t seed = 0x5EED;                 // the forced stream's PRNG seed (also the prompt's)

  int bw_passes = 9;                      // timed passes of the bandwidth probe (median reported)
  uint64_t bw_bytes = 0;                  // probe buffer; 0: 4 x LLC, at least 256 MiB

  std::string json_path, csv_path, plot_path;
  std::string command_line;               // recorded verbatim in the report
};

inline constexpr uint32_t kSynthDefaultLayers = 4;   // the slice a CPU runs in minutes

// The whole command line's consistency; nothing is opened.
Status validate(const Options& options);

// Whether this build has the CUDA device (configured with STRATA_CUDA and nvcc found).
bool cuda_built();

// "256,1024,4096" -> {256, 1024, 4096}; each item an integer >= min_value.
Result<std::vector<int64_t>> parse_int_list(std::string_view text, std::string_view option, int64_t min_value);

// The acceptance of window w (0-based): accept[w % size], or T - 1 (all drafts) by default.
int accepted_drafts(const std::vector<int>& accept, int window, int64_t window_index);

}  // namespace strata::bench
