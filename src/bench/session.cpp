// The bench in order: options, machine, roof, load, runs. The roof is measured before the
// model is loaded so its buffer competes with nothing, and the RAM high-water mark is reset
// after it so peak_ram_bytes is the model's.
#include "strata/bench/session.h"

#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "load.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "unknown"
#endif

namespace strata::bench {

namespace {

Status measure_roof(const Options& o, Report& rep, Progress& progress) {
  BandwidthOptions bo;
  bo.threads = rep.threads;
  bo.bytes = o.bw_bytes;
  bo.llc_bytes = rep.machine.llc_bytes;
  bo.passes = o.bw_passes;
  progress.start(fmt::format("measuring memory read bandwidth ({} MiB, {} threads)", probe_buffer_bytes(bo) >> 20,
                             rep.threads));
  auto bw = measure_host_bandwidth(bo);
  if (!bw) return bw.status();
  rep.bandwidth = *bw;
  progress.finish(fmt::format("measuring memory read bandwidth ({} MiB, {} threads)", probe_buffer_bytes(bo) >> 20,
                              rep.threads));
  if (rep.machine.llc_bytes && rep.bandwidth.buffer_bytes < 2 * rep.machine.llc_bytes) {
    rep.notes.push_back(fmt::format("the bandwidth probe's {} MiB buffer is under 2 x the {} MiB last-level cache: "
                                    "the roof is partly cache bandwidth", rep.bandwidth.buffer_bytes >> 20,
                                    rep.machine.llc_bytes >> 20));
  }
  rep.peak_ram_reset = reset_peak_ram();
  if (!rep.peak_ram_reset) {
    rep.notes.push_back(fmt::format("VmHWM could not be reset after the bandwidth probe: peak_ram_bytes may include "
                                    "its {} MiB buffer", rep.bandwidth.buffer_bytes >> 20));
  }
  return Status::ok_status();
}

}  // namespace

SpecInfo spec_info(const Options& o) {
  SpecInfo s;
  if (o.spec > 0) {
    s.mode = "drafts";
    s.max_drafts = o.spec;
    s.source = o.spec_source.empty() ? "auto" : o.spec_source;
    s.backend = o.device == "cuda" ? "cuda" : "fp32 reference";
  } else if (o.forced) {
    s.mode = "forced";
    s.max_drafts = o.window - 1;
  }
  return s;
}

Report new_report(const Options& o) {
  Report rep;
  rep.timestamp = utc_timestamp();
  rep.command = o.command_line.empty() ? own_command_line() : o.command_line;
  rep.version = STRATA_VERSION;
  rep.machine = probe_machine();
  rep.device = o.device;
  rep.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  rep.forced = o.forced;
  rep.seed = o.seed;
  rep.window = o.window;
  rep.accept = o.accept;
  rep.spec = spec_info(o);
  rep.prefill_chunk = o.prefill_chunk;
  rep.peak_vram_bytes = 0;  // the CPU device holds nothing on a GPU
  rep.load_average_start = load_average();
  return rep;
}

Result<Report> run_bench(const Options& o, Progress& progress) {
  STRATA_TRY(validate(o));  // refuses --device cuda where it is not built
#ifdef STRATA_HAVE_CUDA
  if (o.device == "cuda") return run_cuda_bench(o, progress);
#endif
  // A mistyped path should fail now, not after the roof probe's seconds.
  std::error_code ec;
  if (!o.model_path.empty() && !std::filesystem::exists(o.model_path, ec)) {
    return Status::error(fmt::format("strata bench: -m: {}: no such file", o.model_path));
  }
  Report rep = new_report(o);
  STRATA_TRY(measure_roof(o, rep, progress));

  auto model = load_model(o, rep.threads, progress, rep);
  if (!model) return model.status();
  rep.spec.mtp_available = o.spec > 0 && o.spec_source != "lookup" && (*model)->config().plan.has_mtp();

  const std::vector<int64_t> contexts = o.sweep_ctx.empty() ? std::vector<int64_t>{o.ctx} : o.sweep_ctx;
  for (int64_t ctx : contexts) {
    RunConfig cfg = run_config(o, ctx);
    cfg.progress = [&progress, ctx](std::string_view label, int64_t done, int64_t total) {
      progress.update(fmt::format("ctx {} {}", ctx, label), static_cast<double>(done), static_cast<double>(total),
                      "tok");
    };
    auto run = run_once(**model, cfg);
    if (!run) return run.status();
    progress.finish(fmt::format("ctx {} decode", ctx));
    finish_run(*run, rep.bandwidth.bytes_per_s());
    rep.runs.push_back(std::move(*run));
  }
  rep.peak_ram_bytes = peak_ram_bytes();
  rep.load_average_end = load_average();
  return rep;
}

}  // namespace strata::bench
