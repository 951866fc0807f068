// `strata bench`: the one benchmark whose numbers we trust (docs/BENCH.md). Loads a GGUF or
// makes a synthetic pack in RAM, measures this machine's memory-read roof, runs prefill and
// decode, and reports tok/s, time per stage, bytes read per token and the roof fraction as a
// table (stdout), JSON and CSV; --sweep-ctx also draws tok/s against context as SVG. --device
// cuda (CUDA builds) runs the CUDA decoder instead, with a window sweep and a stage profile.
//
//   strata bench --synth iq3_xxs --layers 4 --ctx 256 --gen 16 --forced --json out.json
//   strata bench --device cuda --synth iq3_xxs --layers 48 --ctx 4096 --gen 128 --forced
//                --window-sweep 1,2,3,4,8 --json out.json
//   strata bench --synth iq3_xxs --layers 2 --ctx 32 --gen 8 --spec 3 --spec-source lookup
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "strata/bench/machine.h"
#include "strata/bench/session.h"

namespace strata::cli {
namespace {

struct BenchArgs {
  bench::Options opt;
  int64_t layers = 0, experts = 0;
  CLI::Option* layers_opt = nullptr;       // given or not: absent means the synth defaults
  CLI::Option* experts_opt = nullptr;
  std::string sweep, accept, window_sweep;
};

// Text lists and "not given" sentinels into the Options, with the same messages as validate().
Status finish_options(BenchArgs& a) {
  if (a.layers_opt->count() > 0) {
    if (a.layers < 1 || a.layers > 48) {
      return Status::error(fmt::format("strata bench: --layers: expected 1..48, got {}", a.layers));
    }
    a.opt.layers = static_cast<uint32_t>(a.layers);
  }
  if (a.experts_opt->count() > 0) {
    if (a.experts < 1 || a.experts > 512) {
      return Status::error(fmt::format("strata bench: --experts: expected 10..512, got {}", a.experts));
    }
    a.opt.experts = static_cast<uint32_t>(a.experts);
  }
  if (!a.sweep.empty()) {
    auto list = bench::parse_int_list(a.sweep, "--sweep-ctx", 1);
    if (!list) return list.status();
    a.opt.sweep_ctx = *list;
  }
  if (!a.accept.empty()) {
    auto list = bench::parse_int_list(a.accept, "--accept", 0);
    if (!list) return list.status();
    for (int64_t v : *list) a.opt.accept.push_back(static_cast<int>(std::min<int64_t>(v, 1 << 20)));
  }
  if (!a.window_sweep.empty()) {
    auto list = bench::parse_int_list(a.window_sweep, "--window-sweep", 1);
    if (!list) return list.status();
    for (int64_t v : *list) a.opt.window_sweep.push_back(static_cast<int>(std::min<int64_t>(v, 1 << 20)));
  }
  a.opt.command_line = bench::own_command_line();
  return bench::validate(a.opt);
}

std::string default_plot_path(const bench::Options& o) {
  if (!o.json_path.empty() && o.json_path != "-") {
    const size_t dot = o.json_path.rfind(".json");
    return (dot == std::string::npos ? o.json_path : o.json_path.substr(0, dot)) + ".svg";
  }
  return "strata-bench-sweep.svg";
}

Status write_outputs(const bench::Options& o, const bench::Report& rep) {
  // A machine-readable file on stdout moves the table to stderr so the two never interleave.
  const bool stdout_taken = o.json_path == "-" || o.csv_path == "-";
  const std::string table = bench::to_table(rep);
  std::fputs(table.c_str(), stdout_taken ? stderr : stdout);
  std::fflush(stdout_taken ? stderr : stdout);
  if (!o.json_path.empty()) STRATA_TRY(bench::write_text(o.json_path, bench::to_json(rep)));
  if (!o.csv_path.empty()) STRATA_TRY(bench::write_text(o.csv_path, bench::to_csv(rep)));
  if (!o.sweep_ctx.empty() || !o.plot_path.empty()) {
    const std::string path = o.plot_path.empty() ? default_plot_path(o) : o.plot_path;
    STRATA_TRY(bench::write_text(path, bench::to_svg(bench::sweep_plot(rep))));
    fmt::print(stderr, "strata bench: plot written to {}\n", path);
  }
  return Status::ok_status();
}

void add_options(CLI::App& app, BenchArgs& a) {
  bench::Options& o = a.opt;
  app.add_option("-m,--model", o.model_path, "qwen4exp GGUF file (any shard of a split set)");
  app.add_option("--synth", o.synth_recipe, "make a synthetic pack in memory instead: q2_0, iq2_xs, iq3_xxs, iq3_s, "
                                            "ud_q4_k_xl");
  a.layers_opt = app.add_option("--layers", a.layers, "--synth: trunk blocks of the slice (default 4; 48 = the whole model)");
  a.experts_opt = app.add_option("--experts", a.experts, "--synth: routed experts per block (10..512, default 512)");
  app.add_option("--synth-seed", o.synth_seed, "--synth: seed of the pack's random weights (default 1)");
  app.add_option("--synth-dir", o.synth_dir, "--synth: write the split set here and keep it (default: RAM-backed "
                                             "storage, removed after loading)");
  app.add_option("--ram-dir", o.ram_dir, "--synth: tmpfs for the in-memory pack (default /dev/shm)");
  app.add_option("--device", o.device, "cpu (the fp32 reference forward) or cuda (the CUDA decoder; CUDA builds)");
  app.add_option("--threads", o.threads, "worker threads (default 0 = every hardware thread)");
  app.add_option("--ctx", o.ctx, "prompt tokens before decode: the context decode runs at (default 256)");
  app.add_option("--gen", o.gen, "tokens to generate (default 16)");
  app.add_option("--window", o.window, "tokens verified per forward, 1..8 (default 1 = plain decode; > 1 needs "
                                       "--forced)");
  app.add_option("--window-sweep", a.window_sweep, "--device cuda --forced: also time windows of each T (e.g. "
                                                   "1,2,3,4,8), with the slope per row and a projected tok/s");
  app.add_option("--accept", a.accept, "--forced: drafts accepted per window, comma-separated, cycled (default: all "
                                       "T-1)");
  app.add_flag("--forced", o.forced, "deterministic: seeded token stream, fixed windows and acceptances");
  app.add_option("--spec", o.spec, "speculative decode through the engine (greedy): up to N drafts per verify window "
                                   "(0 = off, the default; N <= 7); reports windows, drafted, accepted, acceptance "
                                   "rate and tokens per window; not with --forced");
  app.add_option("--spec-source", o.spec_source, "with --spec: draft source mtp (the MTP head), lookup (prompt "
                                                 "lookup) or auto (lookup when the newest 3-gram recurs, else MTP; "
                                                 "the default)");
  app.add_option("--seed", o.seed, "seed of the token stream (default 0x5EED)");
  app.add_option("--sweep-ctx", a.sweep, "run each context (e.g. 256,1024,4096) instead of --ctx and plot tok/s");
  app.add_option("--prefill-chunk", o.prefill_chunk, "prompt tokens per forward call (default 512)");
  app.add_option("--bw-passes", o.bw_passes, "timed passes of the bandwidth probe (default 9; median reported)");
  app.add_option("--bw-bytes", o.bw_bytes, "bandwidth probe buffer in bytes (default 4 x LLC, >= 256 MiB)");
  app.add_option("--json", o.json_path, "write the JSON record here ('-' = stdout; schema in docs/BENCH.md)");
  app.add_option("--csv", o.csv_path, "write one CSV row per context here ('-' = stdout)");
  app.add_option("--plot", o.plot_path, "SVG of tok/s against context (default with --sweep-ctx: next to --json, "
                                        "else strata-bench-sweep.svg)");
}

}  // namespace

CommandMain add_bench_command(CLI::App& app) {
  app.description(
      "Measure prefill and decode speed, time per stage, bytes read per token and the fraction of this\n"
      "machine's memory-read roof (measured at start). Prints a table; --json / --csv for machines.\n"
      "--device cpu runs the fp32 reference forward; --device cuda (CUDA builds) the CUDA decoder.");
  auto args = std::make_shared<BenchArgs>();
  add_options(app, *args);
  return [args]() {
    const Status checked = finish_options(*args);
    if (!checked.ok()) {
      fmt::print(stderr, "{}\n", checked.message());
      return 2;
    }
    bench::Progress progress(bench::stderr_is_tty());
    auto rep = bench::run_bench(args->opt, progress);
    if (!rep) {
      fmt::print(stderr, "{}\n", rep.error());
      return 1;
    }
    const Status written = write_outputs(args->opt, *rep);
    if (!written.ok()) {
      fmt::print(stderr, "{}\n", written.message());
      return 1;
    }
    return 0;
  };
}

}  // namespace strata::cli
