// A whole `strata bench` invocation as data, and its writers: JSON (schema in docs/BENCH.md),
// CSV (one row per run), a table for people and an SVG plot of tok/s against context.
// Writers are pure functions of the Report, so tests check them without running a model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/bench/bandwidth.h"
#include "strata/bench/cuda_bench.h"
#include "strata/bench/machine.h"
#include "strata/bench/runner.h"

namespace strata::bench {

inline constexpr const char* kSchema = "strata.bench/1";

struct ModelInfo {
  std::string source;             // "file" or "synth"
  std::string path;               // -m FILE, or where the synthetic pack was written
  std::string name;               // general.name
  std::optional<std::string> recipe;  // --synth RECIPE, or strata.synth.recipe of a file
  uint32_t layers = 0;            // trunk blocks
  uint32_t experts = 0;           // routed experts per block
  uint32_t experts_used = 0;      // top-k
  uint32_t n_vocab = 0, n_embd = 0;
  uint64_t file_bytes = 0;        // all shards on disk / in RAM (holes included)
  uint64_t weight_bytes = 0;      // every bound tensor but the n-gram table
};

// How the runs' windows were decided, for the "spec" object (docs/BENCH.md §Speculation):
//   "off"     plain decode, one token per window, nothing drafted;
//   "forced"  the --window/--accept pattern: T - 1 drafts per window, the schedule's acceptances;
//   "drafts"  --spec N: engine::generate, greedy, drafts from `source`, the model's acceptances.
struct SpecInfo {
  std::string mode = "off";
  int max_drafts = 0;             // --spec N; forced: T - 1; off: 0
  std::string source;             // drafts: mtp, lookup or auto; otherwise empty
  std::string backend;            // drafts: the engine backend ("fp32 reference", "cuda")
  bool mtp_available = false;     // drafts: the backend ran the model's MTP head
};

struct Report {
  std::string schema = kSchema;
  std::string timestamp;          // UTC, ISO 8601
  std::string command;            // the exact command line
  std::string version;            // strata version
  MachineInfo machine;
  std::string device = "cpu";
  std::string engine = "reference-fp32";
  int threads = 0;
  ModelInfo model;
  bool forced = false;
  uint64_t seed = 0;
  int window = 1;
  std::vector<int> accept;        // the schedule as given (empty: all drafts)
  SpecInfo spec;
  int64_t prefill_chunk = 0;
  Bandwidth bandwidth;
  uint64_t peak_ram_bytes = 0;
  uint64_t peak_vram_bytes = 0;   // 0 on the CPU device
  bool peak_ram_reset = false;    // VmHWM was reset after the bandwidth probe
  double load_average_start = -1.0, load_average_end = -1.0;  // 1-minute, other processes' pressure
  double load_s = 0.0;            // synth + open + page-in
  double prefault_s = 0.0;        // of which: touching every weight page once
  std::vector<RunResult> runs;    // one per context; the first is the headline
  std::optional<CudaSection> cuda;  // --device cuda: the decoder, window sweep and profile
  std::vector<std::string> notes;
};

std::string to_json(const Report& report, int indent = 2);
std::string to_csv(const Report& report);
std::string to_table(const Report& report);

// SpecInfo of the options: mode, drafts, source and backend (mtp_available is the runner's).
SpecInfo spec_info(const Options& options);

// A line plot: x against one or more y series, one panel per series (tok/s of prefill and of
// decode differ by orders of magnitude, so each gets its own y axis).
struct PlotSeries {
  std::string label;
  std::string color;              // CSS color
  std::vector<double> y;
};
struct Plot {
  std::string title;
  std::string x_label;
  std::vector<double> x;
  std::vector<PlotSeries> series;
};
std::string to_svg(const Plot& plot);
Plot sweep_plot(const Report& report);  // decode and prefill tok/s against ctx

// Writes text to a file; "-" is stdout.
Status write_text(const std::string& path, const std::string& text);

}  // namespace strata::bench
