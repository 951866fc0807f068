// The generation loop (include/strata/engine/generate.h).
#include "strata/engine/generate.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "strata/engine/acceptance.h"

namespace strata::engine {
namespace {

// The draft and acceptance draws get streams of their own, derived from the sampler's seed, so
// that a seed fixes the whole run and --spec 0 leaves the sampler's stream as it always was.
constexpr uint64_t kDraftSalt = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kAcceptSalt = 0xD1B54A32D192ED03ull;

std::span<const float> row_of(const std::vector<float>& rows, int64_t i, int64_t vocab) {
  return std::span<const float>(rows).subspan(i * vocab, vocab);
}

Verdict verify(const BackendWindow& w, const Draft& draft, Sampler& sampler, Uniform& accept_u, int64_t vocab) {
  if (draft.tokens.empty()) {
    return {0, sampler.greedy() ? w.argmax[0] : sampler.sample(row_of(w.logits, 0, vocab))};
  }
  if (sampler.greedy()) return accept_greedy(draft.tokens, w.argmax);
  std::vector<Distribution> p;
  for (int64_t i = 0; i < w.n_rows; ++i) p.push_back(sampler.distribution(row_of(w.logits, i, vocab)));
  return accept_sampled(draft.tokens, draft.q, p, accept_u);
}

void count(SpecStats& s, const Draft& draft, int accepted) {
  const int64_t k = static_cast<int64_t>(draft.tokens.size());
  ++s.windows;
  s.drafted += k;
  s.accepted += accepted;
  if (k == 0) return;
  if (draft.source == DraftSource::Mtp) {
    ++s.mtp_windows;
    s.mtp_drafted += k;
    s.mtp_accepted += accepted;
  } else {
    ++s.lookup_windows;
    s.lookup_drafted += k;
    s.lookup_accepted += accepted;
  }
}

void append(std::vector<float>& to, const std::vector<float>& rows) { to.insert(to.end(), rows.begin(), rows.end()); }

}  // namespace

std::string SpecStats::summary() const {
  return fmt::format(
      "spec: {} windows, {} drafted, {} accepted ({:.1f}%), {:.2f} accepted / {:.2f} tokens per window; "
      "mtp {} windows {}/{}, lookup {} windows {}/{}",
      windows, drafted, accepted, 100.0 * acceptance_rate(), accepted_per_window(), tokens_per_window(), mtp_windows,
      mtp_accepted, mtp_drafted, lookup_windows, lookup_accepted, lookup_drafted);
}

Result<GenerateResult> generate(Backend& backend, Sampler& sampler, std::span<const int32_t> prompt,
                                const GenerateOptions& options, const TokenCallback& on_token) {
  if (prompt.empty()) return Status::error("engine: generate: empty prompt");
  if (options.n_generate < 0) return Status::error("engine: generate: n_generate < 0");
  if (options.record_mtp_logits && !backend.has_mtp()) {
    return Status::error("engine: MTP logits asked for, but the backend keeps no MTP cache");
  }
  // (Recording needs a backend created with BackendOptions::mtp_all_logits.)
  const uint64_t seed = sampler.config().seed;
  auto spec = Speculator::create(options.spec, sampler.config(), seed ^ kDraftSalt);
  if (!spec) return spec.status();
  Uniform accept_u(seed ^ kAcceptSalt);
  const int64_t vocab = backend.n_vocab(), p = static_cast<int64_t>(prompt.size());
  const bool greedy = sampler.greedy();
  GenerateResult r;
  r.prompt_tokens = p;

  const auto t0 = std::chrono::steady_clock::now();
  auto pre = backend.prefill(prompt, options.record_logits ? LogitRows::All : greedy ? LogitRows::None : LogitRows::Last);
  if (!pre) return pre.status();
  if (options.record_logits) r.logits = pre->logits;
  if (options.record_mtp_logits) {
    auto rows = backend.mtp_sync();
    if (!rows) return rows.status();
    append(r.mtp_logits, *rows);
  }
  const auto t1 = std::chrono::steady_clock::now();
  r.prefill_s = std::chrono::duration<double>(t1 - t0).count();
  if (options.n_generate == 0) return r;

  std::vector<int32_t> context(prompt.begin(), prompt.end());
  const auto emit = [&](int32_t id) {
    r.ids.push_back(id);
    context.push_back(id);
    return on_token(id);
  };
  const int64_t last_row = static_cast<int64_t>(pre->logits.size()) / vocab - 1;
  int32_t x = greedy ? pre->argmax.back() : sampler.sample(row_of(pre->logits, last_row, vocab));
  if (x < 0) return Status::error("engine: the model produced no finite logit");
  bool go = emit(x);
  const LogitRows window_rows = options.record_logits || !greedy ? LogitRows::All : LogitRows::None;

  while (go && static_cast<int>(r.ids.size()) < options.n_generate) {
    // k drafts yield up to k + 1 tokens: never draft past the tokens still wanted.
    const int room = std::min(options.n_generate - static_cast<int>(r.ids.size()) - 1, backend.max_window() - 1);
    auto draft = spec->propose(backend, context, room);
    if (!draft) return draft.status();
    if (options.record_mtp_logits) {
      if (!draft->mtp_started) {
        auto rows = backend.mtp_start(x);
        if (!rows) return rows.status();
        draft->mtp_rows = std::move(*rows);
      }
      append(r.mtp_logits, draft->mtp_rows);
    }
    std::vector<int32_t> window{x};
    window.insert(window.end(), draft->tokens.begin(), draft->tokens.end());
    auto w = backend.forward(window, window_rows);
    if (!w) return w.status();
    const Verdict v = verify(*w, *draft, sampler, accept_u, vocab);
    if (v.next < 0) return Status::error("engine: the model produced no finite logit");
    STRATA_TRY(backend.commit(v.accepted + 1));
    if (options.record_logits) {
      r.logits.insert(r.logits.end(), w->logits.begin(), w->logits.begin() + (v.accepted + 1) * vocab);
    }
    count(r.stats, *draft, v.accepted);
    for (int i = 0; i < v.accepted && go; ++i) go = emit(draft->tokens[i]);
    if (go) go = emit(v.next);
    x = v.next;
  }

  // Rows past the last emitted token (a stop inside accepted drafts) are cut: P + G - 1 rows.
  const size_t rows = static_cast<size_t>(p + static_cast<int64_t>(r.ids.size()) - 1);
  if (options.record_logits && r.logits.size() > rows * vocab) r.logits.resize(rows * vocab);
  if (options.record_mtp_logits) {
    auto last = backend.mtp_start(x);  // the slot of the last emitted token, as plain decoding has it
    if (!last) return last.status();
    append(r.mtp_logits, *last);
    if (r.mtp_logits.size() > rows * vocab) r.mtp_logits.resize(rows * vocab);
  }
  r.decode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  return r;
}

}  // namespace strata::engine
