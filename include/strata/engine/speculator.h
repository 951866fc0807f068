// Drafts for a verify window (docs/SPEC.md §Drafts and §Policy).
//
// Prompt lookup: the newest n-gram of the context (its last n tokens, the pending token x
// included) is searched for in the earlier context, n = 3, then 2, then 1; the first n that
// occurs wins, and of its occurrences the most recent one (the one ending latest, before the
// context's end). The draft is the up to max tokens that followed it. No match: no draft.
//
// MTP chain: the head drafts the token after x from the trunk's wide residual, then chains on
// its own output. Greedy: the draft is the argmax of the head's logits. Sampled: the draft is
// drawn from q = the sampler's distribution of those logits (same temperature and cuts as the
// trunk's), and q is what the acceptance rule divides by. The chain stops before a draft whose
// head probability (softmax of the head's logits at temperature 1, no cuts) is below min_p.
//
// Policy (DraftSource::Auto): lookup when the newest 3-gram recurs (a long match: text that
// repeats, such as code or quoted input, tends to continue as it did), otherwise MTP; with no
// MTP head, lookup at any n.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/engine/acceptance.h"
#include "strata/engine/backend.h"
#include "strata/engine/sampler.h"

namespace strata::engine {

enum class DraftSource { Mtp, Lookup, Auto };

inline constexpr int kMaxDrafts = 7;       // a window is x + up to 7 drafts = 8 rows
inline constexpr int kLookupMaxNgram = 3;  // the longest n-gram lookup matches (also auto's "long")

struct SpecConfig {
  int max_drafts = 0;     // --spec N: 0 = off
  float min_p = 0.0f;     // --spec-min-p: stop the MTP chain below this head probability
  DraftSource source = DraftSource::Auto;
};

struct LookupMatch {
  int ngram = 0;                  // n of the match (0: none)
  std::vector<int32_t> tokens;    // what followed it, up to max
};

// The prompt-lookup rule above on `context` (whose last token is x), n from max_ngram down to 1.
LookupMatch lookup_draft(std::span<const int32_t> context, int max, int max_ngram = kLookupMaxNgram);

struct Draft {
  DraftSource source = DraftSource::Lookup;  // Mtp or Lookup (which one this window used)
  std::vector<int32_t> tokens;
  std::vector<Distribution> q;               // per draft: what it was drawn from (sampled only)
  std::vector<float> mtp_rows;               // logits of the real MTP slots mtp_start() filled
  bool mtp_started = false;
};

class Speculator {
 public:
  // Checks the config (max_drafts 0 .. kMaxDrafts, min_p in [0, 1]); draft_seed seeds the MTP
  // chain's draws in sampled mode.
  static Result<Speculator> create(SpecConfig config, const SamplerConfig& sampling, uint64_t draft_seed);

  // Up to `max` drafts to follow x = context.back(), the token at backend.n_past().
  Result<Draft> propose(Backend& backend, std::span<const int32_t> context, int max);

  const SpecConfig& config() const { return config_; }

 private:
  Speculator(SpecConfig config, Sampler sampler, uint64_t draft_seed)
      : config_(config), sampler_(std::move(sampler)), draft_u_(draft_seed) {}
  Status mtp_chain(Backend& backend, int32_t x, int max, Draft& draft);
  void lookup(LookupMatch&& match, Draft& draft) const;

  SpecConfig config_;
  Sampler sampler_;   // the trunk's settings: q for MTP drafts
  Uniform draft_u_;   // the MTP chain's draws from q
};

}  // namespace strata::engine
