// The JSON record (schema strata.bench/1, docs/BENCH.md). Field names are the contract with
// scripts that compare runs: add fields freely, never rename one without bumping the schema.
#include <string_view>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "strata/bench/report.h"
#include "strata/bench/spec_json.h"

namespace strata::bench {

namespace {

using nlohmann::json;

std::string hex64(uint64_t v) { return fmt::format("0x{:016x}", v); }

json stages_json(const StageTimes& times) {
  json out = json::object();
  for (const auto& [name, t] : times) out[name] = {{"seconds", t.seconds}, {"calls", t.calls}};
  return out;
}

json bytes_json(const ByteCounts& b) {
  return {{"dense", b.dense}, {"experts", b.experts}, {"embed", b.embed}, {"ngram", b.ngram},
          {"kv", b.kv},       {"state", b.state},     {"total", b.total()}};
}

// How the windows were decided, and the headline run's counts and decode rate.
json spec_json(const SpecInfo& info, const RunResult& head) {
  json j = {{"mode", info.mode},
            {"max_drafts", info.max_drafts},
            {"source", info.source.empty() ? json(nullptr) : json(info.source)},
            {"backend", info.backend.empty() ? json(nullptr) : json(info.backend)},
            {"mtp_available", info.mtp_available}};
  j.update(spec_counts_json(head.spec));
  j["tokens"] = head.tokens_generated;
  j["decode_tok_s"] = head.decode_tok_s;
  return j;
}

json run_json(const RunResult& r) {
  return {
      {"ctx", r.ctx},
      {"gen", r.gen},
      {"tokens_generated", r.tokens_generated},
      {"windows", r.windows},
      {"replays", r.replays},
      {"prefill_s", r.prefill_s},
      {"decode_s", r.decode_s},
      {"prefill_tok_s", r.prefill_tok_s},
      {"decode_tok_s", r.decode_tok_s},
      {"bytes_per_token", r.bytes_per_token},
      {"decode_bytes", bytes_json(r.decode_bytes)},
      {"experts_per_block", r.experts_per_block},
      {"roof_fraction", r.roof_fraction},
      {"instrumentation_s", r.instrumentation_s},
      {"prefill_cpu_s", r.prefill_cpu_s},
      {"decode_cpu_s", r.decode_cpu_s},
      {"window_s", r.window_s},
      {"window_s_median", r.window_s.empty() ? 0.0 : median(r.window_s)},
      {"stages", {{"prefill", stages_json(r.prefill_stages)},
                  {"decode", stages_json(r.decode_stages)},
                  {"commit", stages_json(r.commit_stages)}}},
      {"prompt_fnv1a", hex64(r.prompt_hash)},
      {"output_fnv1a", hex64(r.output_hash)},
      {"output_head", r.output_head},
      {"spec", spec_counts_json(r.spec)},
  };
}

json machine_json(const MachineInfo& m) {
  return {{"cpu_model", m.cpu_model}, {"cores", m.cores},     {"threads", m.threads}, {"llc_bytes", m.llc_bytes},
          {"ram_bytes", m.ram_bytes}, {"kernel", m.kernel}, {"hostname", m.hostname}};
}

json model_json(const ModelInfo& m) {
  return {{"source", m.source},
          {"path", m.path},
          {"name", m.name},
          {"recipe", m.recipe ? json(*m.recipe) : json(nullptr)},
          {"layers", m.layers},
          {"experts", m.experts},
          {"experts_used", m.experts_used},
          {"n_vocab", m.n_vocab},
          {"n_embd", m.n_embd},
          {"file_bytes", m.file_bytes},
          {"weight_bytes", m.weight_bytes}};
}

json bandwidth_json(const Bandwidth& b) {
  return {{"gb_s", b.gb_s},
          {"bytes_per_s", b.bytes_per_s()},
          {"passes_gb_s", b.passes_gb_s},
          {"buffer_bytes", b.buffer_bytes},
          {"threads", b.threads},
          {"kernel", b.kernel},
          {"method", std::string_view(b.kernel) == "cuda"
                         ? "GPU streaming read of a buffer over the L2 (strata devices --measure), median of passes"
                         : "multi-threaded streaming read, median of passes"}};
}

json cuda_stages_json(const std::vector<CudaStage>& stages) {
  json out = json::array();
  for (const CudaStage& s : stages) {
    out.push_back({{"stage", s.stage}, {"ms", s.ms}, {"launches", s.launches}, {"share", s.share}});
  }
  return out;
}

json window_run_json(const CudaWindowRun& r) {
  return {
      {"window", r.window},
      {"ctx_start", r.ctx_start},
      {"windows", r.windows},
      {"tokens", r.tokens},
      {"decode_s", r.decode_s},
      {"window_ms", r.window_ms},
      {"window_ms_median", r.window_ms_median},
      {"ms_per_token", r.ms_per_token},
      {"tok_s", r.tok_s},
      {"bytes", bytes_json(r.bytes)},
      {"bytes_per_token", r.bytes_per_token},
      {"roof_fraction", r.roof_fraction},
      {"experts_per_block", r.experts_per_block},
      {"experts_upper_bound", r.window > 1},
      {"expected_tokens_75", r.expected_tokens},
      {"projected_tok_s_75", r.projected_tok_s},
      {"profile", cuda_stages_json(r.profile)},
      {"profile_ms", r.profile_ms},
  };
}

json cuda_json(const CudaSection& c) {
  json sweep = json::array();
  for (const CudaWindowRun& r : c.sweep) sweep.push_back(window_run_json(r));
  return {
      {"gpu", c.gpu},
      {"compute_capability", c.compute_capability},
      {"sm_count", c.sm_count},
      {"vram_total_bytes", c.vram_total_bytes},
      {"vram_used_bytes", c.vram_used_bytes},
      {"max_ctx", c.max_ctx},
      {"max_window", c.max_window},
      {"prefill_window", c.prefill_window},
      {"weight_bytes", c.weight_bytes},
      {"state_bytes", c.state_bytes},
      {"graph_nodes", c.graph_nodes},
      {"upload_s", c.upload_s},
      {"weights_generated", c.weights_generated},
      {"roof_probe_gib", c.roof_probe_gib},
      {"decode", window_run_json(c.decode)},
      {"sweep", sweep},
      {"slope_ms_per_row", c.slope_ms_per_row},
      {"intercept_ms", c.intercept_ms},
      {"projected_acceptance", kProjectedAcceptance},
  };
}

}  // namespace

nlohmann::json spec_counts_json(const engine::SpecStats& s) {
  return json{{"windows", s.windows},
              {"drafted", s.drafted},
              {"accepted", s.accepted},
              {"acceptance_rate", s.acceptance_rate()},
              {"accepted_per_window", s.accepted_per_window()},
              {"tokens_per_window", s.tokens_per_window()},
              {"mtp", {{"windows", s.mtp_windows}, {"drafted", s.mtp_drafted}, {"accepted", s.mtp_accepted}}},
              {"lookup", {{"windows", s.lookup_windows}, {"drafted", s.lookup_drafted}, {"accepted", s.lookup_accepted}}}};
}

std::string to_json(const Report& rep, int indent) {
  json j;
  j["schema"] = rep.schema;
  j["timestamp"] = rep.timestamp;
  j["command"] = rep.command;
  j["version"] = rep.version;
  j["machine"] = machine_json(rep.machine);
  j["device"] = rep.device;
  j["engine"] = rep.engine;
  j["threads"] = rep.threads;
  j["model"] = model_json(rep.model);
  j["recipe"] = rep.model.recipe ? json(*rep.model.recipe) : json(nullptr);
  j["forced"] = rep.forced;
  j["seed"] = rep.seed;
  j["window"] = rep.window;
  j["accept"] = rep.accept.empty() ? std::vector<int>{rep.window - 1} : rep.accept;
  j["prefill_chunk"] = rep.prefill_chunk;
  j["bandwidth"] = bandwidth_json(rep.bandwidth);
  // The headline numbers are the first run's; every run is in "runs".
  const RunResult head = rep.runs.empty() ? RunResult{} : rep.runs.front();
  j["ctx"] = head.ctx;
  j["gen"] = head.gen;
  j["decode_tok_s"] = head.decode_tok_s;
  j["prefill_tok_s"] = head.prefill_tok_s;
  j["bytes_per_token"] = head.bytes_per_token;
  j["roof_fraction"] = head.roof_fraction;
  j["peak_ram_bytes"] = rep.peak_ram_bytes;
  j["peak_vram_bytes"] = rep.peak_vram_bytes;
  j["peak_ram_reset_after_probe"] = rep.peak_ram_reset;
  j["load_average_start"] = rep.load_average_start;
  j["load_average_end"] = rep.load_average_end;
  j["load_s"] = rep.load_s;
  j["prefault_s"] = rep.prefault_s;
  j["spec"] = spec_json(rep.spec, head);
  j["runs"] = json::array();
  for (const RunResult& r : rep.runs) j["runs"].push_back(run_json(r));
  if (rep.cuda) j["cuda"] = cuda_json(*rep.cuda);
  j["notes"] = rep.notes;
  return j.dump(indent) + "\n";
}

}  // namespace strata::bench
