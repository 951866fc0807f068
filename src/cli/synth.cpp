// `strata synth --out DIR --recipe NAME [--layers N] [--experts E] [--mtp] [--seed S]
// [--routing-skew S] [--dry-run]`: a synthetic qwen4exp pack at the released geometry (or a
// slice of it) with the type mix of a published pack, for measuring speed before a 70 GB
// download (docs/SYNTH.md). --dry-run prints the plan as JSON and writes nothing.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "strata/synth/synth.h"

namespace strata::cli {
namespace {

struct SynthArgs {
  std::string out;
  std::string recipe;
  synth::Options options;
  bool dry_run = false;
  bool progress = false;
  unsigned threads = 0;
};

// A one-line bar on stderr, redrawn at most 10 times a second.
class ProgressBar {
 public:
  void update(const synth::Progress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (p.done_bytes < p.total_bytes && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double frac = p.total_bytes ? static_cast<double>(p.done_bytes) / static_cast<double>(p.total_bytes) : 1.0;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(p.done_bytes) / secs : 0.0;
    const double eta = rate > 0 ? static_cast<double>(p.total_bytes - p.done_bytes) / rate : 0.0;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    fmt::print(stderr, "\r[{}{}] {:5.1f}%  {:.1f}/{:.1f} GB  {:.0f} MB/s  ETA {:.0f}s  {:<40.40}",
               std::string(filled, '#'), std::string(kWidth - filled, '.'), 100.0 * frac,
               static_cast<double>(p.done_bytes) / 1e9, static_cast<double>(p.total_bytes) / 1e9, rate / 1e6, eta,
               p.tensor);
    std::fflush(stderr);
  }
  void finish() { fmt::print(stderr, "\n"); }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

int run_synth(SynthArgs& args) {
  auto recipe = synth::recipe_from_name(args.recipe);
  if (!recipe) {
    fmt::print(stderr, "strata synth: unknown recipe '{}' (expected one of {})\n", args.recipe, synth::recipe_names());
    return 2;
  }
  args.options.recipe = *recipe;
  auto plan = synth::make_plan(args.options);
  if (!plan) {
    fmt::print(stderr, "strata {}\n", plan.error());
    return 2;
  }
  if (args.dry_run) {
    fmt::print("{}\n", synth::plan_json(*plan));
    return 0;
  }
  if (args.out.empty()) {
    fmt::print(stderr, "strata synth: --out DIR is required (or --dry-run)\n");
    return 2;
  }
  synth::WriteOptions wopt;
  wopt.threads = args.threads;
  auto bar = std::make_shared<ProgressBar>();
  const bool show = args.progress || ::isatty(STDERR_FILENO);
  if (show) wopt.progress = [bar](const synth::Progress& p) { bar->update(p); };
  auto paths = synth::write_pack(*plan, args.out, wopt);
  if (show) bar->finish();
  if (!paths) {
    fmt::print(stderr, "strata {}\n", paths.error());
    return 1;
  }
  for (size_t i = 0; i < paths->size(); ++i) {
    const synth::ShardPlan& s = plan->shards[i];
    fmt::print("{}  {} tensors  {:.2f} GB{}\n", (*paths)[i], s.n_tensors, static_cast<double>(s.file_bytes) / 1e9,
               s.hole_bytes ? fmt::format(" ({:.2f} GB sparse zeros)", static_cast<double>(s.hole_bytes) / 1e9) : "");
  }
  return 0;
}

}  // namespace

CommandMain add_synth_command(CLI::App& app) {
  app.description("Write a synthetic qwen4exp pack (random valid weights, published shapes and types)");
  auto args = std::make_shared<SynthArgs>();
  app.add_option("--out", args->out, "Output directory");
  app.add_option("--recipe", args->recipe, "Type mix: " + synth::recipe_names())->required();
  app.add_option("--layers", args->options.layers, "Trunk layers (1..48; a slice keeps layers 0..N-1)");
  app.add_option("--experts", args->options.experts, "Routed experts per layer (10..512)");
  app.add_flag("--mtp", args->options.mtp, "Append the MTP draft block");
  app.add_option("--seed", args->options.seed, "Random seed");
  app.add_option("--routing-skew", args->options.routing_skew,
                 "Routing share of the most-used 55% of experts (0.55 uniform .. 0.99; real model 0.88)");
  app.add_flag("--router-f32", args->options.router_f32, "F32 routers (converter rule) instead of the recipe's");
  app.add_flag("--random-table", args->options.random_table,
               "Fill the n-gram table with random blocks (29 GB on disk) instead of a sparse hole");
  app.add_option("--threads", args->threads, "Generator threads (default: all cores)");
  app.add_flag("--dry-run", args->dry_run, "Print the plan as JSON and write nothing");
  app.add_flag("--progress", args->progress, "Show a progress bar even when stderr is not a terminal");
  return [args] { return run_synth(*args); };
}

}  // namespace strata::cli
