// Loading for the bench: a GGUF file, or a synthetic pack written to RAM-backed storage (or
// a directory), then every weight page touched once so the timed runs do not pay first-touch
// faults (a disk read for a file, a page-table fill for tmpfs) that a warmed engine never pays.
#include "load.h"

#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "strata/synth/synth.h"

namespace strata::bench {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Every bound tensor but the n-gram table, which is read a few rows per token and is 29 GB
// (a file hole in synthetic packs). Mirrors model::Block's fields: a field missing here is
// only paged in later, inside the timed runs.
template <class Fn>
void for_each_weight(const model::Weights& w, Fn&& fn) {
  for (const model::Tensor* t : {&w.token_embd, &w.output, &w.output_hc_norm, &w.output_hc_down, &w.output_hc_up}) fn(*t);
  for (const model::Block& b : w.blocks) {
    for (const model::Tensor* t :
         {&b.hc_attn_norm, &b.hc_attn_down, &b.hc_attn_up, &b.hc_attn_inject, &b.hc_ffn_norm, &b.hc_ffn_down,
          &b.hc_ffn_up, &b.hc_ffn_inject, &b.attn_qkv, &b.attn_gate, &b.ssm_conv1d, &b.ssm_dt_bias, &b.ssm_a,
          &b.ssm_alpha, &b.ssm_beta, &b.ssm_norm, &b.ssm_out, &b.attn_q, &b.attn_k, &b.attn_v, &b.attn_output,
          &b.attn_q_norm, &b.attn_k_norm, &b.indexer_q_proj, &b.indexer_k_proj, &b.indexer_q_norm,
          &b.indexer_k_norm, &b.ffn_gate_inp, &b.ffn_gate_exps, &b.ffn_up_exps, &b.ffn_gate_up_exps,
          &b.ffn_down_exps, &b.ffn_gate_shexp, &b.ffn_up_shexp, &b.ffn_down_shexp, &b.ffn_gate_inp_shexp,
          &b.ple_key, &b.ple_value, &b.ple_norm_key, &b.ple_norm_query, &b.ple_norm_conv, &b.ple_conv1d,
          &b.nextn_eh_proj, &b.nextn_enorm, &b.nextn_hnorm, &b.nextn_hc_head_norm, &b.nextn_hc_head_down,
          &b.nextn_hc_head_up}) {
      fn(*t);
    }
  }
}

uint64_t prefault(const model::Weights& w, Progress& progress) {
  uint64_t total = 0, done = 0;
  for_each_weight(w, [&](const model::Tensor& t) {
    if (t) total += static_cast<uint64_t>(t.rows()) * t.row_bytes;
  });
  volatile uint8_t sink = 0;
  const uint8_t* last_page = nullptr;  // `output` may alias token_embd: touch it once
  for_each_weight(w, [&](const model::Tensor& t) {
    if (!t || t.data == last_page) return;
    last_page = t.data;
    const uint64_t n = static_cast<uint64_t>(t.rows()) * t.row_bytes;
    uint8_t acc = 0;
    for (uint64_t i = 0; i < n; i += 4096) acc ^= t.data[i];
    if (n) acc ^= t.data[n - 1];
    sink = sink ^ acc;
    done += n;
    progress.update("paging in weights", static_cast<double>(done) / 1e6, static_cast<double>(total) / 1e6, "MB");
  });
  return total;
}

// Name, recipe and sizes from the file's own metadata (a second, cheap mapping).
Status describe_file(const std::string& path, ModelInfo& info) {
  auto file = gguf::Model::open(path);
  if (!file) return file.status();
  const gguf::Metadata& md = file->metadata();
  if (auto name = md.get_string("general.name")) info.name = *name;
  if (auto recipe = md.get_string("strata.synth.recipe")) info.recipe = *recipe;
  for (const gguf::File& shard : file->shards()) info.file_bytes += shard.size();
  for (const gguf::TensorInfo& t : file->tensors()) {
    if (t.name != "per_layer_token_embd.weight") info.weight_bytes += t.nbytes;
  }
  return Status::ok_status();
}

Result<std::unique_ptr<reference::Model>> open_synth(const Options& o, int threads, Progress& progress, Report& rep) {
  auto plan = synth::make_plan(synth_options(o));
  if (!plan) return plan.status();
  synth::WriteOptions wo;
  wo.threads = static_cast<unsigned>(threads);
  wo.progress = [&progress](const synth::Progress& p) {
    progress.update("writing synthetic pack", static_cast<double>(p.done_bytes) / 1e6,
                    static_cast<double>(p.total_bytes) / 1e6, "MB");
  };
  rep.model.source = "synth";
  if (!o.synth_dir.empty()) {
    auto paths = synth::write_pack(*plan, o.synth_dir, wo);
    if (!paths) return paths.status();
    progress.finish("writing synthetic pack");
    rep.model.path = paths->front();
    STRATA_TRY(describe_file(rep.model.path, rep.model));
    return reference::Model::open(rep.model.path, threads);
  }
  auto pack = synth::write_ram_pack(*plan, {o.ram_dir, wo});
  if (!pack) return pack.status();
  progress.finish("writing synthetic pack");
  rep.model.path = pack->path();
  STRATA_TRY(describe_file(rep.model.path, rep.model));
  rep.notes.push_back(fmt::format("synthetic pack written to {} and unlinked once mapped (RAM-backed, {:.2f} GB "
                                  "written; the n-gram table is a hole)",
                                  o.ram_dir, static_cast<double>(plan->written_bytes()) / 1e9));
  // The RamPack unlinks the name when it goes; the model's mapping keeps the pages.
  return reference::Model::open(pack->path(), threads);
}

}  // namespace

synth::Options synth_options(const Options& o) {
  synth::Options so;
  so.recipe = *synth::recipe_from_name(o.synth_recipe);
  so.layers = o.layers.value_or(kSynthDefaultLayers);
  so.experts = o.experts.value_or(512);
  so.seed = o.synth_seed;
  return so;
}

Result<std::unique_ptr<reference::Model>> load_model(const Options& o, int threads, Progress& progress, Report& rep) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<reference::Model>> model = Status::error("strata bench: no model");
  if (!o.synth_recipe.empty()) {
    model = open_synth(o, threads, progress, rep);
  } else {
    rep.model.source = "file";
    rep.model.path = o.model_path;
    STRATA_TRY(describe_file(o.model_path, rep.model));
    progress.start("opening model");
    model = reference::Model::open(o.model_path, threads);
    progress.finish("opening model");
  }
  if (!model) return model.status();
  const model::ModelConfig& c = (*model)->config();
  rep.model.layers = c.plan.n_trunk;
  rep.model.experts = c.n_expert;
  rep.model.experts_used = c.n_expert_used;
  rep.model.n_vocab = c.n_vocab;
  rep.model.n_embd = c.n_embd;

  const auto p0 = std::chrono::steady_clock::now();
  prefault((*model)->weights(), progress);
  progress.finish("paging in weights");
  rep.prefault_s = since(p0);
  rep.load_s = since(t0);
  return model;
}

}  // namespace strata::bench
