// Prefill and decode of one run, timed by wall clock per forward and per stage (StageMeter).
#include "strata/bench/runner.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "strata/bench/forced.h"
#include "strata/bench/machine.h"
#include "strata/engine/reference_backend.h"
#include "strata/engine/sampler.h"
#include "strata/reference/forward.h"

namespace strata::bench {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int32_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;  // ties keep the lower id, as strata run
  }
  return static_cast<int32_t>(best);
}

class Runner {
 public:
  Runner(const reference::Model& model, const RunConfig& cfg)
      : model_(model), cfg_(cfg), meter_(model), state_(reference::SequenceState::create(model.config())) {}

  Result<RunResult> run();

 private:
  Result<reference::ForwardOutput> forward(std::span<const int32_t> tokens, Phase phase, bool count);
  Status prefill();
  Status decode_forced();
  Status decode_greedy();
  Status prefill_and_decode_spec();
  void emit(std::span<const int32_t> ids);
  void report(std::string_view label, int64_t done, int64_t total) const {
    // A last window may emit past the goal; progress stops at 100%.
    if (cfg_.progress) cfg_.progress(label, std::min(done, total), total);
  }

  const reference::Model& model_;
  const RunConfig& cfg_;
  StageMeter meter_;
  reference::SequenceState state_;
  std::vector<int32_t> stream_;     // forced stream: prompt, then every window's tokens
  std::vector<int32_t> emitted_;
  std::vector<float> last_logits_;  // greedy decode feeds the argmax of these
  RunResult r_;
};

Result<reference::ForwardOutput> Runner::forward(std::span<const int32_t> tokens, Phase phase, bool count) {
  reference::ForwardOptions fo;
  fo.gdn = reference::GdnPath::Auto;  // the engine's default: chunked prompt, recurrent decode
  fo.sink = meter_.sink();
  meter_.begin(phase, state_, count);
  auto out = reference::forward(model_, state_, tokens, fo);
  meter_.end();
  return out;
}

Status Runner::prefill() {
  const int64_t vocab = model_.config().n_vocab;
  const auto t0 = Clock::now();
  const double cpu0 = process_cpu_seconds();
  report("prefill", 0, cfg_.ctx);
  for (int64_t p = 0; p < cfg_.ctx; p += cfg_.prefill_chunk) {
    const int64_t n = std::min(cfg_.prefill_chunk, cfg_.ctx - p);
    auto out = forward(std::span<const int32_t>(stream_).subspan(p, n), Phase::Prefill, false);
    if (!out) return out.status();
    if (p + n == cfg_.ctx) last_logits_.assign(out->logits.end() - vocab, out->logits.end());
    report("prefill", p + n, cfg_.ctx);
  }
  r_.prefill_s = since(t0);
  r_.prefill_cpu_s = process_cpu_seconds() - cpu0;
  return Status::ok_status();
}

// Window w feeds stream[pos .. pos+T) (the last accepted token and T-1 drafts that are the
// stream's own next ids), accepts k of the drafts and emits stream[pos+1 .. pos+k+1].
Status Runner::decode_forced() {
  const int t = cfg_.window;
  int64_t pos = cfg_.ctx;
  for (int64_t w = 0; r_.tokens_generated < cfg_.gen; ++w) {
    const int k = accepted_drafts(cfg_.accept, t, w);
    const auto t0 = Clock::now();
    std::optional<reference::SequenceState> snapshot;
    if (k + 1 < t) {
      const auto s0 = Clock::now();
      snapshot = state_;
      meter_.add_time(Phase::Commit, "snapshot", since(s0));
    }
    const std::span<const int32_t> window(stream_.data() + pos, static_cast<size_t>(t));
    auto out = forward(window, Phase::Decode, true);
    if (!out) return out.status();
    if (snapshot) {
      // Roll back to the accepted length: restore, then replay the k+1 kept tokens.
      state_ = std::move(*snapshot);
      auto replay = forward(window.first(k + 1), Phase::Commit, true);
      if (!replay) return replay.status();
      ++r_.replays;
    }
    r_.window_s.push_back(since(t0));
    ++r_.windows;
    emit(std::span<const int32_t>(stream_).subspan(pos + 1, k + 1));
    pos += k + 1;
    report("decode", r_.tokens_generated, cfg_.gen);
  }
  return Status::ok_status();
}

// Greedy: the prompt's argmax is fed back one token per forward, as `strata run` does.
Status Runner::decode_greedy() {
  const int64_t vocab = model_.config().n_vocab;
  int32_t next = argmax(last_logits_.data(), vocab);
  while (r_.tokens_generated < cfg_.gen) {
    const auto t0 = Clock::now();
    auto out = forward({&next, 1}, Phase::Decode, true);
    if (!out) return out.status();
    next = argmax(out->logits.data(), vocab);
    r_.window_s.push_back(since(t0));
    ++r_.windows;
    emit({&next, 1});
    report("decode", r_.tokens_generated, cfg_.gen);
  }
  return Status::ok_status();
}

// The engine's reference backend with the meter around its trunk forwards (the meter's sink
// is the backend's stage sink): the prompt in --prefill-chunk pieces, as Runner::prefill;
// each window's time runs from the end of the previous one (so the drafting in between is
// decode time) to the end of its commit, the replay of a partial commit metered as "commit".
class MeteredBackend final : public engine::Backend {
 public:
  MeteredBackend(engine::ReferenceBackend& inner, StageMeter& meter, const RunConfig& cfg, RunResult& r)
      : inner_(inner), meter_(meter), cfg_(cfg), r_(r) {}

  std::string name() const override { return inner_.name(); }
  int64_t n_vocab() const override { return inner_.n_vocab(); }
  int max_window() const override { return inner_.max_window(); }
  int64_t n_past() const override { return inner_.n_past(); }

  Result<engine::BackendWindow> prefill(std::span<const int32_t> tokens, engine::LogitRows rows) override {
    const auto t0 = Clock::now();
    const double cpu0 = process_cpu_seconds();
    const int64_t n_tok = static_cast<int64_t>(tokens.size());
    progress("prefill", 0, n_tok);
    Result<engine::BackendWindow> out = Status::error("strata bench: empty prompt");
    for (int64_t p = 0; p < n_tok; p += cfg_.prefill_chunk) {
      const int64_t n = std::min(cfg_.prefill_chunk, n_tok - p);
      meter_.begin(Phase::Prefill, inner_.state(), false);
      out = inner_.prefill(tokens.subspan(static_cast<size_t>(p), static_cast<size_t>(n)), rows);
      meter_.end();
      if (!out) return out;
      progress("prefill", p + n, n_tok);
    }
    r_.prefill_s = since(t0);
    r_.prefill_cpu_s = process_cpu_seconds() - cpu0;
    decode_cpu0_ = process_cpu_seconds();
    mark_ = Clock::now();
    return out;  // the last piece's rows: greedy generation needs only its last argmax
  }

  Result<engine::BackendWindow> forward(std::span<const int32_t> tokens, engine::LogitRows rows) override {
    rows_ = static_cast<int>(tokens.size());
    meter_.begin(Phase::Decode, inner_.state(), true);
    auto out = inner_.forward(tokens, rows);
    meter_.end();
    return out;
  }

  Status commit(int n) override {
    Status s = Status::ok_status();
    if (n < rows_) {
      meter_.begin(Phase::Commit, inner_.state(), true);  // restore the mark and replay n rows
      s = inner_.commit(n);
      meter_.end();
      ++r_.replays;
    } else {
      s = inner_.commit(n);
    }
    if (!s.ok()) return s;
    const auto now = Clock::now();
    r_.window_s.push_back(std::chrono::duration<double>(now - mark_).count());
    mark_ = now;
    ++r_.windows;
    return s;
  }

  bool has_mtp() const override { return inner_.has_mtp(); }
  Result<std::vector<float>> mtp_sync() override { return inner_.mtp_sync(); }
  Result<std::vector<float>> mtp_start(int32_t next) override { return inner_.mtp_start(next); }
  Result<std::vector<float>> mtp_continue(int32_t draft) override { return inner_.mtp_continue(draft); }

  double decode_cpu0() const { return decode_cpu0_; }
  void progress(std::string_view label, int64_t done, int64_t total) const {
    if (cfg_.progress) cfg_.progress(label, std::min(done, total), total);
  }

 private:
  engine::ReferenceBackend& inner_;
  StageMeter& meter_;
  const RunConfig& cfg_;
  RunResult& r_;
  int rows_ = 0;                // rows of the open window
  Clock::time_point mark_;      // end of the prompt or of the last window
  double decode_cpu0_ = 0.0;
};

// --spec N: prefill and greedy decode through engine::generate. generate emits the prompt's
// argmax first, from no decode window; the bench feeds it, as decode_greedy does, and counts
// the gen tokens the windows yield after it (n_generate = gen + 1).
Status Runner::prefill_and_decode_spec() {
  const model::ModelConfig& c = model_.config();
  if (cfg_.spec_source == engine::DraftSource::Mtp && !c.plan.has_mtp()) {
    return Status::error("strata bench: --spec-source mtp: the model has no MTP block (nextn_predict_layers); use "
                         "lookup or auto");
  }
  if (cfg_.gen + 1 > INT32_MAX) return Status::error("strata bench: --gen: too large for --spec");
  engine::BackendOptions bo;
  bo.device = engine::Device::Cpu;
  bo.mtp = cfg_.spec_source != engine::DraftSource::Lookup && c.plan.has_mtp();
  bo.prefill_gdn = reference::GdnPath::Auto;  // as Runner::prefill
  bo.sink = meter_.sink();
  auto backend = engine::create_backend(model_, bo);
  if (!backend) return backend.status();
  auto* reference = dynamic_cast<engine::ReferenceBackend*>(backend->get());
  if (reference == nullptr) return Status::error("strata bench: --spec: the CPU backend is not the reference");
  MeteredBackend metered(*reference, meter_, cfg_, r_);

  engine::SamplerConfig sc;  // greedy
  sc.seed = cfg_.seed;
  auto sampler = engine::Sampler::create(sc);
  if (!sampler) return sampler.status();
  engine::GenerateOptions go;
  go.n_generate = static_cast<int>(cfg_.gen + 1);
  go.spec.max_drafts = cfg_.spec;
  go.spec.source = cfg_.spec_source;
  bool first = true;
  auto out = engine::generate(metered, *sampler, std::span<const int32_t>(stream_).first(cfg_.ctx), go,
                              [&](int32_t id) {
                                if (first) {
                                  first = false;  // the prompt's argmax: fed, not counted
                                  metered.progress("decode", 0, cfg_.gen);
                                  return true;
                                }
                                emit({&id, 1});
                                metered.progress("decode", r_.tokens_generated, cfg_.gen);
                                return true;
                              });
  if (!out) return out.status();
  r_.decode_cpu_s = process_cpu_seconds() - metered.decode_cpu0();
  r_.spec = out->stats;
  if (r_.spec.windows != r_.windows || r_.tokens_generated != r_.spec.windows + r_.spec.accepted) {
    return Status::error(fmt::format("strata bench: --spec: inconsistent counts ({} windows metered, {} counted, "
                                     "{} tokens, {} accepted)",
                                     r_.windows, r_.spec.windows, r_.tokens_generated, r_.spec.accepted));
  }
  return Status::ok_status();
}

void Runner::emit(std::span<const int32_t> ids) {
  emitted_.insert(emitted_.end(), ids.begin(), ids.end());
  r_.tokens_generated += static_cast<int64_t>(ids.size());
}

Result<RunResult> Runner::run() {
  const model::ModelConfig& c = model_.config();
  r_.ctx = cfg_.ctx;
  r_.gen = cfg_.gen;
  // Enough ids for the prompt, every emitted token and a last window's drafts.
  stream_ = forced_tokens(cfg_.seed, c.n_vocab, cfg_.ctx + cfg_.gen + cfg_.window + 1);
  r_.prompt_hash = fnv1a(std::span<const int32_t>(stream_).first(cfg_.ctx));

  if (cfg_.spec > 0) {
    STRATA_TRY(prefill_and_decode_spec());
  } else {
    STRATA_TRY(prefill());
    const double cpu0 = process_cpu_seconds();
    report("decode", 0, cfg_.gen);
    STRATA_TRY(cfg_.forced ? decode_forced() : decode_greedy());
    r_.decode_cpu_s = process_cpu_seconds() - cpu0;
    r_.spec = cfg_.forced ? forced_spec_stats(cfg_.accept, cfg_.window, r_.windows)
                          : forced_spec_stats({}, 1, r_.windows);
  }

  for (double s : r_.window_s) r_.decode_s += s;
  r_.prefill_tok_s = r_.prefill_s > 0 ? static_cast<double>(cfg_.ctx) / r_.prefill_s : 0.0;
  r_.decode_tok_s = r_.decode_s > 0 ? static_cast<double>(r_.tokens_generated) / r_.decode_s : 0.0;
  r_.decode_bytes = meter_.bytes();
  r_.bytes_per_token = r_.tokens_generated > 0
                           ? static_cast<double>(r_.decode_bytes.total()) / static_cast<double>(r_.tokens_generated)
                           : 0.0;
  r_.experts_per_block = meter_.router_calls() > 0
                             ? static_cast<double>(meter_.expert_groups()) / static_cast<double>(meter_.router_calls())
                             : 0.0;
  r_.instrumentation_s = meter_.overhead_s();
  r_.prefill_stages = meter_.times(Phase::Prefill);
  r_.decode_stages = meter_.times(Phase::Decode);
  r_.commit_stages = meter_.times(Phase::Commit);
  r_.output_hash = fnv1a(emitted_);
  r_.output_head.assign(emitted_.begin(), emitted_.begin() + std::min<size_t>(emitted_.size(), 32));
  return r_;
}

}  // namespace

RunConfig run_config(const Options& o, int64_t ctx) {
  RunConfig cfg;
  cfg.ctx = ctx;
  cfg.gen = o.gen;
  cfg.prefill_chunk = o.prefill_chunk;
  cfg.window = o.window;
  cfg.accept = o.accept;
  cfg.forced = o.forced;
  cfg.seed = o.seed;
  cfg.spec = o.spec;
  cfg.spec_source = draft_source(o.spec_source);
  return cfg;
}

engine::DraftSource draft_source(const std::string& name) {
  return name == "mtp" ? engine::DraftSource::Mtp : name == "lookup" ? engine::DraftSource::Lookup
                                                                     : engine::DraftSource::Auto;
}

engine::SpecStats forced_spec_stats(const std::vector<int>& accept, int window, int64_t windows) {
  engine::SpecStats s;
  s.windows = windows;
  s.drafted = windows * (window - 1);
  for (int64_t w = 0; w < windows; ++w) s.accepted += accepted_drafts(accept, window, w);
  return s;
}

Result<RunResult> run_once(const reference::Model& model, const RunConfig& config) {
  const model::ModelConfig& c = model.config();
  const int64_t needed = config.ctx + config.gen + config.window;
  if (c.context_length > 0 && needed > static_cast<int64_t>(c.context_length)) {
    return Status::error(fmt::format("strata bench: --ctx {} + --gen {} + --window {} exceeds the model's context "
                                     "(expected <= {}, got {})",
                                     config.ctx, config.gen, config.window, c.context_length, needed));
  }
  if (config.window > 1 && !config.forced) {
    return Status::error("strata bench: --window > 1 needs --forced");
  }
  if (config.spec > 0 && (config.forced || config.window > 1)) {
    return Status::error("strata bench: --spec cannot be combined with --forced or --window");
  }
  if (config.spec < 0 || config.spec > kMaxSpecDrafts) {
    return Status::error(fmt::format("strata bench: --spec: expected 0..{}, got {}", kMaxSpecDrafts, config.spec));
  }
  Runner runner(model, config);
  return runner.run();
}

double decode_cpu_share(const RunResult& run, int threads) {
  return run.decode_s > 0 && threads > 0 ? run.decode_cpu_s / (run.decode_s * threads) : 0.0;
}

void finish_run(RunResult& run, double bandwidth_bytes_s) {
  run.roof_fraction = bandwidth_bytes_s > 0 ? run.bytes_per_token * run.decode_tok_s / bandwidth_bytes_s : 0.0;
}

}  // namespace strata::bench
