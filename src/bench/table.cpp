// The table for people: what ran where, the roof, one line per context, and where the
// decode time of the headline run went, stage by stage.
#include <algorithm>

#include <fmt/format.h>

#include "strata/bench/report.h"

namespace strata::bench {

namespace {

std::string gb(uint64_t bytes) { return fmt::format("{:.2f} GB", static_cast<double>(bytes) / 1e9); }

std::string header(const Report& rep) {
  const ModelInfo& m = rep.model;
  std::string out = fmt::format("strata bench {}  {}  device {} ({}, {} threads)\n", rep.version, rep.timestamp,
                                rep.device, rep.engine, rep.threads);
  out += fmt::format("machine  {}, {} cores / {} threads, LLC {} MiB, RAM {}\n", rep.machine.cpu_model,
                     rep.machine.cores, rep.machine.threads, rep.machine.llc_bytes >> 20, gb(rep.machine.ram_bytes));
  out += fmt::format("model    {} {}{}, {} layer{} x {} experts (top-{}), weights {}\n", m.source,
                     m.recipe.value_or(m.name), m.source == "file" ? " (" + m.path + ")" : "", m.layers,
                     m.layers == 1 ? "" : "s", m.experts, m.experts_used, gb(m.weight_bytes));
  if (rep.cuda) {
    const CudaSection& c = *rep.cuda;
    out += fmt::format("gpu      {} (sm_{}, {} SMs, {} VRAM), read roof {:.0f} GB/s ({} MiB probe)   VRAM in use {}   "
                       "peak RAM {}\n",
                       c.gpu, c.compute_capability, c.sm_count, gb(c.vram_total_bytes), rep.bandwidth.gb_s,
                       rep.bandwidth.buffer_bytes >> 20, gb(c.vram_used_bytes), gb(rep.peak_ram_bytes));
    out += fmt::format("decoder  weights resident {}, state {}, {} graph nodes (T = 1), upload {:.1f} s ({}), "
                       "cache {} tokens\n",
                       gb(static_cast<uint64_t>(c.weight_bytes)), gb(static_cast<uint64_t>(c.state_bytes)),
                       c.graph_nodes, c.upload_s, c.weights_generated ? "generated from the plan" : "from the file",
                       c.max_ctx);
  } else {
    out += fmt::format("memory   read roof {:.2f} GB/s (median of {} passes, {} MiB, {} threads, {})   peak RAM {}   "
                       "peak VRAM {}\n",
                       rep.bandwidth.gb_s, rep.bandwidth.passes_gb_s.size(), rep.bandwidth.buffer_bytes >> 20,
                       rep.bandwidth.threads, rep.bandwidth.kernel, gb(rep.peak_ram_bytes),
                       rep.device == "cpu" ? std::string("n/a (cpu)") : gb(rep.peak_vram_bytes));
  }
  out += fmt::format("host     load average {:.2f} at start, {:.2f} at end (other processes compete for the cores)\n",
                     rep.load_average_start, rep.load_average_end);
  if (rep.spec.mode == "drafts") {
    out += fmt::format("decode   greedy, speculative: up to {} drafts per window from {} ({}{}); load {:.1f} s\n",
                       rep.spec.max_drafts, rep.spec.source, rep.spec.backend,
                       rep.spec.mtp_available ? ", MTP head" : rep.spec.source == "lookup" ? "" : ", no MTP head: lookup only",
                       rep.load_s);
  } else {
    out += fmt::format("decode   {}, window {}, {}; load {:.1f} s\n",
                       rep.forced ? fmt::format("forced (seed {:#x})", rep.seed) : std::string("greedy"), rep.window,
                       rep.accept.empty() ? fmt::format("accept {} of {} drafts", rep.window - 1, rep.window - 1)
                                          : fmt::format("accept schedule {}", fmt::join(rep.accept, ",")),
                       rep.load_s);
  }
  return out;
}

std::string runs_table(const Report& rep) {
  std::string out = fmt::format("\n{:>7} {:>5} {:>7} {:>14} {:>13} {:>10} {:>10} {:>8} {:>9}\n", "ctx", "gen", "window",
                                "prefill tok/s", "decode tok/s", "ms/token", "MB/token", "roof", "cpu share");
  for (const RunResult& r : rep.runs) {
    const double ms = r.decode_tok_s > 0 ? 1000.0 / r.decode_tok_s : 0.0;
    // The CUDA device's host threads wait on the GPU: their CPU share says nothing.
    const std::string share =
        rep.cuda ? std::string("-") : fmt::format("{:.0f}%", 100.0 * decode_cpu_share(r, rep.threads));
    const std::string window = rep.spec.mode == "drafts" ? fmt::format("1+{}", rep.spec.max_drafts)
                                                         : std::to_string(rep.window);
    out += fmt::format("{:>7} {:>5} {:>7} {:>14.3f} {:>13.4f} {:>10.3f} {:>10.1f} {:>7.2f}% {:>9}\n", r.ctx,
                       r.tokens_generated, window, r.prefill_tok_s, r.decode_tok_s, ms, r.bytes_per_token / 1e6,
                       100.0 * r.roof_fraction, share);
  }
  return out;
}

// Windows, drafts and acceptances of every run: the drafter's (--spec), the pattern's
// (--forced) or plain decode's (nothing drafted).
std::string spec_table(const Report& rep) {
  const SpecInfo& s = rep.spec;
  std::string what = s.mode == "drafts"   ? fmt::format("--spec {}, source {}", s.max_drafts, s.source)
                     : s.mode == "forced" ? std::string("forced: acceptances set by --window/--accept")
                                          : std::string("off: one token per window");
  std::string out = fmt::format("\nspeculation ({})\n{:>7} {:>8} {:>8} {:>9} {:>12} {:>16} {:>14} {:>13}\n", what,
                                "ctx", "windows", "drafted", "accepted", "accept rate", "accepted/window",
                                "tokens/window", "decode tok/s");
  for (const RunResult& r : rep.runs) {
    const engine::SpecStats& c = r.spec;
    const std::string rate = c.drafted > 0 ? fmt::format("{:.1f}%", 100.0 * c.acceptance_rate()) : std::string("-");
    out += fmt::format("{:>7} {:>8} {:>8} {:>9} {:>12} {:>16.2f} {:>14.2f} {:>13.4f}\n", r.ctx, c.windows, c.drafted,
                       c.accepted, rate, c.accepted_per_window(), c.tokens_per_window(), r.decode_tok_s);
  }
  const engine::SpecStats& h = rep.runs.empty() ? engine::SpecStats{} : rep.runs.front().spec;
  if (s.mode == "drafts" && (h.mtp_windows > 0 || h.lookup_windows > 0)) {
    out += fmt::format("  by source at ctx {}: mtp {} windows {}/{} accepted, lookup {} windows {}/{} accepted\n",
                       rep.runs.front().ctx, h.mtp_windows, h.mtp_accepted, h.mtp_drafted, h.lookup_windows,
                       h.lookup_accepted, h.lookup_drafted);
  }
  return out;
}

// Stages of the first run, slowest decode first: prefill seconds, decode ms per emitted token.
std::string stage_table(const RunResult& r) {
  std::vector<std::string> names;
  for (const StageTimes* t : {&r.decode_stages, &r.commit_stages, &r.prefill_stages}) {
    for (const auto& [name, _] : *t) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  const auto get = [](const StageTimes& t, const std::string& n) {
    auto it = t.find(n);
    return it == t.end() ? 0.0 : it->second.seconds;
  };
  const auto decode_of = [&](const std::string& n) { return get(r.decode_stages, n) + get(r.commit_stages, n); };
  std::stable_sort(names.begin(), names.end(), [&](const auto& a, const auto& b) { return decode_of(a) > decode_of(b); });
  const double tokens = std::max<double>(1.0, static_cast<double>(r.tokens_generated));
  std::string out = fmt::format("\nstages at ctx {} {:>18} {:>16} {:>9}\n", r.ctx, "prefill s", "decode ms/token",
                                "decode %");
  for (const std::string& n : names) {
    out += fmt::format("  {:<24} {:>12.3f} {:>16.2f} {:>8.1f}%\n", n, get(r.prefill_stages, n),
                       1000.0 * decode_of(n) / tokens, r.decode_s > 0 ? 100.0 * decode_of(n) / r.decode_s : 0.0);
  }
  const ByteCounts& b = r.decode_bytes;
  out += fmt::format("\nbytes/token  {:.1f} MB = dense {:.1f} + experts {:.1f} + embed {:.3f} + ngram {:.3f} + kv {:.3f} "
                     "+ state {:.3f} (MB); {:.1f} distinct experts per block per forward\n",
                     r.bytes_per_token / 1e6, b.dense / tokens / 1e6, b.experts / tokens / 1e6, b.embed / tokens / 1e6,
                     b.ngram / tokens / 1e6, b.kv / tokens / 1e6, b.state / tokens / 1e6, r.experts_per_block);
  return out;
}

std::string bytes_line(const CudaWindowRun& r) {
  const double tokens = std::max<double>(1.0, static_cast<double>(r.tokens));
  const ByteCounts& b = r.bytes;
  return fmt::format("bytes/token  {:.1f} MB = dense {:.1f} + experts {:.1f} + embed {:.3f} + kv {:.3f} + state {:.3f} "
                     "(MB); {:.0f} experts per block per window{}\n",
                     r.bytes_per_token / 1e6, b.dense / tokens / 1e6, b.experts / tokens / 1e6, b.embed / tokens / 1e6,
                     b.kv / tokens / 1e6, b.state / tokens / 1e6, r.experts_per_block,
                     r.window > 1 ? " (distinct per row assumed: an upper bound)" : "");
}

// Slowest stage first, with its share of the profiled window.
std::string profile_line(const CudaWindowRun& r) {
  std::vector<CudaStage> stages = r.profile;
  std::stable_sort(stages.begin(), stages.end(), [](const auto& a, const auto& b) { return a.ms > b.ms; });
  std::string out = fmt::format("  T={} {:.3f} ms:", r.window, r.profile_ms);
  for (const CudaStage& s : stages) out += fmt::format(" {} {:.3f} ({:.0f}%)", s.stage, s.ms, 100.0 * s.share);
  return out + "\n";
}

std::string cuda_table(const CudaSection& c) {
  const CudaWindowRun& d = c.decode;
  std::string out = fmt::format("\ndecode T={} at ctx {}: {:.3f} ms/window (median), {:.3f} ms/token, {:.1f} tok/s, "
                                "roof {:.1f}%\n",
                                d.window, d.ctx_start, d.window_ms_median, d.ms_per_token, d.tok_s,
                                100.0 * d.roof_fraction);
  out += bytes_line(d);
  if (!c.sweep.empty()) {
    out += fmt::format("\nwindow sweep {:>10} {:>10} {:>9} {:>9} {:>7} {:>12} {:>16}\n", "ms/window", "ms/token",
                       "tok/s", "GB/token", "roof", "E[tok] a=.75", "proj tok/s a=.75");
    for (const CudaWindowRun& r : c.sweep) {
      out += fmt::format("  T={:<9} {:>10.3f} {:>10.3f} {:>9.1f} {:>9.3f} {:>6.1f}% {:>12.3f} {:>16.1f}\n", r.window,
                         r.window_ms_median, r.ms_per_token, r.tok_s, r.bytes_per_token / 1e9,
                         100.0 * r.roof_fraction, r.expected_tokens, r.projected_tok_s);
    }
    out += fmt::format("  slope {:.3f} ms per added row (least squares, intercept {:.3f} ms)\n", c.slope_ms_per_row,
                       c.intercept_ms);
  }
  if (d.profile.empty() && c.sweep.empty()) return out;  // --spec: no profiled window
  out += "\nprofile (one window per T, stage ms and share)\n" + profile_line(d);
  for (const CudaWindowRun& r : c.sweep) out += profile_line(r);
  return out;
}

}  // namespace

std::string to_table(const Report& rep) {
  std::string out = header(rep) + runs_table(rep) + spec_table(rep);
  if (rep.cuda) {
    out += cuda_table(*rep.cuda);
  } else if (!rep.runs.empty()) {
    out += stage_table(rep.runs.front());
  }
  for (const std::string& n : rep.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace strata::bench
