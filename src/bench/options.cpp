#include "strata/bench/options.h"

#include <charconv>

#include <fmt/format.h>

#include "strata/synth/synth.h"

namespace strata::bench {

namespace {

Status fail(std::string_view option, std::string_view what) {
  return Status::error(fmt::format("strata bench: {}: {}", option, what));
}

Status check_model_choice(const Options& o) {
  const bool file = !o.model_path.empty(), synth = !o.synth_recipe.empty();
  if (file == synth) {
    return fail("-m/--synth", fmt::format("expected exactly one of -m FILE or --synth RECIPE, got {}",
                                          file ? "both" : "neither"));
  }
  if (file && (o.layers || o.experts || !o.synth_dir.empty())) {
    return fail("--layers/--experts/--synth-dir", "only apply to --synth (a file has its own geometry)");
  }
  if (!synth) return Status::ok_status();
  const auto recipe = synth::recipe_from_name(o.synth_recipe);
  if (!recipe) {
    return fail("--synth", fmt::format("unknown recipe (expected one of {}, got '{}')", synth::recipe_names(), o.synth_recipe));
  }
  synth::Options so;
  so.recipe = *recipe;
  so.layers = o.layers.value_or(kSynthDefaultLayers);
  so.experts = o.experts.value_or(512);
  so.seed = o.synth_seed;
  const Status s = synth::validate(so);
  if (!s.ok()) return Status::error("strata bench: --synth: " + s.message());
  return Status::ok_status();
}

Status check_device(const Options& o) {
  if (o.device == "cpu") {
    if (!o.window_sweep.empty()) return fail("--window-sweep", "only applies to --device cuda");
    return Status::ok_status();
  }
  if (o.device != "cuda") return fail("--device", fmt::format("expected cpu or cuda, got '{}'", o.device));
  if (!cuda_built()) {
    return fail("--device cuda", "not available in this build: configure with -DSTRATA_CUDA=ON on a machine with "
                                 "nvcc; use --device cpu");
  }
  // The decoder runs one context per load (its caches are sized for it).
  if (!o.sweep_ctx.empty()) return fail("--sweep-ctx", "only applies to --device cpu (use one --ctx per run)");
  for (int t : o.window_sweep) {
    if (t < 1 || t > kMaxWindow) {
      return fail("--window-sweep", fmt::format("expected windows of 1..{} tokens, got {}", kMaxWindow, t));
    }
  }
  if (!o.window_sweep.empty() && !o.forced) {
    return fail("--window-sweep", "needs --forced (the sweep's windows feed the forced stream)");
  }
  return Status::ok_status();
}

Status check_window(const Options& o) {
  if (o.window < 1 || o.window > kMaxWindow) {
    return fail("--window", fmt::format("expected 1..{} tokens per window, got {}", kMaxWindow, o.window));
  }
  if (o.window > 1 && !o.forced) {
    // Without a drafter (the MTP speculator is engine work) only forced acceptances are honest.
    return fail("--window", fmt::format("a window of {} needs --forced (no draft model runs in the reference "
                                        "bench, so acceptances must be fixed)", o.window));
  }
  for (int a : o.accept) {
    if (a < 0 || a > o.window - 1) {
      return fail("--accept", fmt::format("expected drafts accepted per window in 0..{} (window {} = 1 token + {} "
                                          "drafts), got {}", o.window - 1, o.window, o.window - 1, a));
    }
  }
  if (!o.accept.empty() && !o.forced) return fail("--accept", "only applies with --forced");
  return Status::ok_status();
}

Status check_spec(const Options& o) {
  if (o.spec < 0 || o.spec > kMaxSpecDrafts) {
    return fail("--spec", fmt::format("expected 0..{} drafts per window (0 = off), got {}", kMaxSpecDrafts, o.spec));
  }
  if (!o.spec_source.empty() && o.spec_source != "mtp" && o.spec_source != "lookup" && o.spec_source != "auto") {
    return fail("--spec-source", fmt::format("expected mtp, lookup or auto, got '{}'", o.spec_source));
  }
  if (o.spec == 0) {
    if (!o.spec_source.empty()) return fail("--spec-source", "only applies with --spec N > 0");
    return Status::ok_status();
  }
  if (o.forced) {
    return fail("--spec", "cannot be combined with --forced (--forced fixes the tokens and the acceptances by the "
                          "--window/--accept pattern; --spec drafts and verifies against the model's own greedy "
                          "output)");
  }
  if (o.window > 1) {
    return fail("--window", fmt::format("only applies with --forced; with --spec {} a window holds 1 + up to {} "
                                        "drafts, as many as the drafter proposes", o.spec, o.spec));
  }
  return Status::ok_status();
}

Status check_sizes(const Options& o) {
  if (o.ctx < 1) return fail("--ctx", fmt::format("expected >= 1 prompt token, got {}", o.ctx));
  if (o.gen < 1) return fail("--gen", fmt::format("expected >= 1 generated token, got {}", o.gen));
  for (int64_t c : o.sweep_ctx) {
    if (c < 1) return fail("--sweep-ctx", fmt::format("expected contexts >= 1, got {}", c));
  }
  if (o.prefill_chunk < 1) return fail("--prefill-chunk", fmt::format("expected >= 1, got {}", o.prefill_chunk));
  if (o.threads < 0) return fail("--threads", fmt::format("expected >= 0 (0 = all), got {}", o.threads));
  if (o.bw_passes < 1 || o.bw_passes > 1000) return fail("--bw-passes", fmt::format("expected 1..1000, got {}", o.bw_passes));
  if (o.bw_bytes != 0 && o.bw_bytes < (1u << 20)) {
    return fail("--bw-bytes", fmt::format("expected at least 1 MiB (or 0 for auto), got {}", o.bw_bytes));
  }
  return Status::ok_status();
}

}  // namespace

bool cuda_built() {
#ifdef STRATA_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

Status validate(const Options& o) {
  STRATA_TRY(check_device(o));
  STRATA_TRY(check_model_choice(o));
  STRATA_TRY(check_sizes(o));
  STRATA_TRY(check_spec(o));  // before check_window: with --spec, --window's conflict is with --spec
  STRATA_TRY(check_window(o));
  return Status::ok_status();
}

Result<std::vector<int64_t>> parse_int_list(std::string_view text, std::string_view option, int64_t min_value) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || v < min_value) {
      return fail(option, fmt::format("expected comma-separated integers >= {}, got '{}'", min_value, item));
    }
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

int accepted_drafts(const std::vector<int>& accept, int window, int64_t window_index) {
  if (accept.empty()) return window - 1;
  return accept[static_cast<size_t>(window_index) % accept.size()];
}

}  // namespace strata::bench
