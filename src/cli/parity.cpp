// `strata parity [--json FILE] [--bench] [--filter TEXT] [--seed N] [--device N] [--host-only]
// [--model F]... [--synth-slices]`: every CUDA kernel of the decode path against the CPU
// reference, one line per case, with --bench the time and bandwidth of each mmvq case, and with
// --model / --synth-slices the whole decoder against reference::forward on those files. Exit
// code 1 on any failed case. The rules are in docs/PARITY.md; the harness is src/cuda/parity.cpp.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"

#ifdef STRATA_HAVE_CUDA
#include "strata/cuda/parity.h"
#endif

namespace strata::cli {
namespace {

struct ParityCliOptions {
  int device = 0;
  uint64_t seed = 0x5EED2026u;
  std::string filter;
  std::string shard;  // "K/N"
  std::string json;
  bool bench = false;
  int bench_reps = 20;
  bool host_only = false;
  std::vector<std::string> models;
  bool synth_slices = false;
};

#ifdef STRATA_HAVE_CUDA
int run_parity_command(const ParityCliOptions& o) {
  cuda::ParityOptions opt;
  opt.device = o.device;
  opt.seed = o.seed;
  opt.filter = o.filter;
  if (!o.shard.empty()) {
    int k = -1, n = 0;
    char tail = 0;
    if (std::sscanf(o.shard.c_str(), "%d/%d%c", &k, &n, &tail) != 2 || n < 1 || k < 0 || k >= n) {
      fmt::print(stderr, "strata parity: --shard: expected K/N with 0 <= K < N, got '{}'\n", o.shard);
      return 1;
    }
    opt.shard_index = k;
    opt.shard_count = n;
  }
  opt.json_path = o.json;
  opt.bench = o.bench;
  opt.bench_reps = o.bench_reps;
  opt.host_only = o.host_only;
  opt.models = o.models;
  opt.synth_slices = o.synth_slices;
  auto summary = cuda::run_parity(opt);
  if (!summary) {
    fmt::print(stderr, "strata parity: {}\n", summary.error());
    return 1;
  }
  return summary->failed == 0 ? 0 : 1;
}
#else
int run_parity_command(const ParityCliOptions&) {
  fmt::print(stderr, "strata parity: this build has no CUDA support (configure with -DSTRATA_CUDA=ON)\n");
  return 1;
}
#endif

}  // namespace

CommandMain add_parity_command(CLI::App& app) {
  app.description("Check every CUDA kernel against the CPU reference (and time mmvq with --bench)");
  auto opt = std::make_shared<ParityCliOptions>();
  app.add_option("--json", opt->json, "Write every case's result to this JSON file");
  app.add_flag("--bench", opt->bench, "Time each mmvq case that passed (median of graph launches, weights rotated past the L2)");
  app.add_option("--bench-reps", opt->bench_reps, "Timed rounds per case")->check(CLI::Range(3, 1000));
  app.add_option("--filter", opt->filter, "Run only the cases whose line contains this text, e.g. 'mmvq(type=iq3_xxs'");
  app.add_option("--shard", opt->shard, "K/N: run only the cases whose line hashes to shard K of N (N processes "
                                       "in parallel cover every case once)");
  app.add_option("--seed", opt->seed, "Seed of the random inputs");
  app.add_option("--device", opt->device, "CUDA device index")->check(CLI::NonNegativeNumber);
  app.add_flag("--host-only", opt->host_only, "Only the host run of the device decoders (no GPU needed)");
  app.add_option("--model", opt->models, "A GGUF file for the whole-decoder checks (repeatable)")->check(CLI::ExistingFile);
  app.add_flag("--synth-slices", opt->synth_slices,
               "Whole-decoder stage check on a 4-layer, 16-expert synthetic slice of every recipe");
  return [opt] { return run_parity_command(*opt); };
}

}  // namespace strata::cli
