// Prompt-lookup and MTP drafts and the per-window policy (rules in
// include/strata/engine/speculator.h).
#include "strata/engine/speculator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace strata::engine {
namespace {

// softmax(logits)[id] at temperature 1 over the finite logits: the head's own confidence.
double head_probability(std::span<const float> logits, int32_t id) {
  float top = -std::numeric_limits<float>::infinity();
  for (float v : logits) {
    if (std::isfinite(v)) top = std::max(top, v);
  }
  double sum = 0.0;
  for (float v : logits) {
    if (std::isfinite(v)) sum += std::exp(static_cast<double>(v) - top);
  }
  return std::exp(static_cast<double>(logits[id]) - top) / sum;
}

}  // namespace

LookupMatch lookup_draft(std::span<const int32_t> context, int max, int max_ngram) {
  LookupMatch m;
  const int64_t len = static_cast<int64_t>(context.size());
  if (max <= 0) return m;
  for (int n = max_ngram; n >= 1; --n) {
    if (len < n + 1) continue;
    const auto suffix = context.subspan(len - n, n);
    // Occurrences that end before the context does, most recent first.
    for (int64_t s = len - n - 1; s >= 0; --s) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + s)) continue;
      const int64_t from = s + n, to = std::min(len, from + max);
      m.ngram = n;
      m.tokens.assign(context.begin() + from, context.begin() + to);
      return m;
    }
  }
  return m;
}

Result<Speculator> Speculator::create(SpecConfig config, const SamplerConfig& sampling, uint64_t draft_seed) {
  if (config.max_drafts < 0 || config.max_drafts > kMaxDrafts) {
    return Status::error(fmt::format("engine: --spec: expected 0 .. {} drafts, got {}", kMaxDrafts, config.max_drafts));
  }
  if (!(config.min_p >= 0.0f && config.min_p <= 1.0f)) {
    return Status::error(fmt::format("engine: --spec-min-p: expected 0 .. 1, got {}", config.min_p));
  }
  auto sampler = Sampler::create(sampling);
  if (!sampler) return sampler.status();
  return Speculator(config, std::move(*sampler), draft_seed);
}

void Speculator::lookup(LookupMatch&& match, Draft& draft) const {
  draft.source = DraftSource::Lookup;
  draft.tokens = std::move(match.tokens);
  // A lookup draft involves no randomness: its q is the point mass on it.
  if (!sampler_.greedy()) {
    for (int32_t d : draft.tokens) draft.q.push_back({{d, 1.0}});
  }
}

Status Speculator::mtp_chain(Backend& backend, int32_t x, int max, Draft& draft) {
  draft.source = DraftSource::Mtp;
  auto start = backend.mtp_start(x);
  if (!start) return start.status();
  draft.mtp_started = true;
  const size_t vocab = static_cast<size_t>(backend.n_vocab());
  std::vector<float> row(start->end() - vocab, start->end());
  draft.mtp_rows = std::move(*start);
  for (int i = 0; i < max; ++i) {
    if (i > 0) {
      auto next = backend.mtp_continue(draft.tokens.back());
      if (!next) return next.status();
      row = std::move(*next);
    }
    int32_t d = -1;
    Distribution q;
    if (sampler_.greedy()) {
      d = argmax(row);
    } else {
      q = sampler_.distribution(row);
      d = draw(q, draft_u_());
    }
    if (d < 0 || head_probability(row, d) < config_.min_p) break;
    draft.tokens.push_back(d);
    if (!sampler_.greedy()) draft.q.push_back(std::move(q));
  }
  return Status::ok_status();
}

Result<Draft> Speculator::propose(Backend& backend, std::span<const int32_t> context, int max) {
  Draft draft;
  max = std::min(max, config_.max_drafts);
  if (max <= 0 || context.empty()) return draft;
  const bool mtp = backend.has_mtp() && config_.source != DraftSource::Lookup;
  if (config_.source == DraftSource::Mtp && !mtp) {
    return Status::error("engine: --spec-source mtp: this model or backend has no MTP head");
  }
  if (config_.source != DraftSource::Mtp) {
    LookupMatch match = lookup_draft(context, max);
    if (!mtp || match.ngram == kLookupMaxNgram) {
      lookup(std::move(match), draft);
      return draft;
    }
  }
  STRATA_TRY(mtp_chain(backend, context.back(), max, draft));
  return draft;
}

}  // namespace strata::engine
