// CSV: one row per run with the columns a spreadsheet or a regression script needs; the
// machine, model and command repeat on every row so rows from many files concatenate.
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "strata/bench/report.h"

namespace strata::bench {

namespace {

constexpr const char* kColumns[] = {
    "timestamp",     "device",         "engine",         "recipe",          "model",       "layers",
    "experts",       "threads",        "ctx",            "gen",             "tokens_generated",
    "window",        "forced",         "prefill_tok_s",  "decode_tok_s",    "prefill_s",   "decode_s",
    "bytes_per_token", "bandwidth_gb_s", "roof_fraction", "decode_cpu_share", "load_average_start",
    "peak_ram_bytes", "peak_vram_bytes",
    "cpu_model",     "cores",          "command",
    "spec_mode",     "spec_max_drafts", "spec_windows",  "spec_drafted",    "spec_accepted",
    "acceptance_rate", "tokens_per_window",
};

// RFC 4180: quote a field holding a comma, quote or line break; double inner quotes.
std::string field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string num(double v) { return fmt::format("{:.9g}", v); }

}  // namespace

std::string to_csv(const Report& rep) {
  std::string out;
  for (const char* c : kColumns) out += (out.empty() ? "" : ",") + std::string(c);
  out += "\n";
  const std::string model = rep.model.name.empty() ? rep.model.path : rep.model.name;
  for (const RunResult& r : rep.runs) {
    const std::vector<std::string> row = {
        rep.timestamp, rep.device, rep.engine, rep.model.recipe.value_or(""), model,
        std::to_string(rep.model.layers), std::to_string(rep.model.experts), std::to_string(rep.threads),
        std::to_string(r.ctx), std::to_string(r.gen), std::to_string(r.tokens_generated),
        std::to_string(rep.window), rep.forced ? "true" : "false", num(r.prefill_tok_s), num(r.decode_tok_s),
        num(r.prefill_s), num(r.decode_s), num(r.bytes_per_token), num(rep.bandwidth.gb_s), num(r.roof_fraction),
        num(decode_cpu_share(r, rep.threads)), num(rep.load_average_start),
        std::to_string(rep.peak_ram_bytes), std::to_string(rep.peak_vram_bytes), rep.machine.cpu_model,
        std::to_string(rep.machine.cores), rep.command,
        rep.spec.mode, std::to_string(rep.spec.max_drafts), std::to_string(r.spec.windows),
        std::to_string(r.spec.drafted), std::to_string(r.spec.accepted), num(r.spec.acceptance_rate()),
        num(r.spec.tokens_per_window()),
    };
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + field(row[i]);
    out += "\n";
  }
  return out;
}

Status write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return Status::ok_status();
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::error(fmt::format("strata bench: cannot write {}", path));
  f << text;
  f.close();
  if (!f) return Status::error(fmt::format("strata bench: writing {} failed", path));
  return Status::ok_status();
}

}  // namespace strata::bench
