// The generation loop (docs/SPEC.md): prefill the prompt, choose the first token from its last
// row, then windows. Each window runs [x, d_1 .. d_k] (x: the pending token, d: drafts from
// the Speculator, k <= --spec and never more than the tokens still wanted need), verifies the
// drafts (acceptance.h), commits the rows it keeps and yields m + 1 tokens. With no drafts a
// window is plain decoding: one row, and the token comes from Sampler::sample, so --spec 0
// draws exactly what the sampler alone draws for a seed.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/engine/backend.h"
#include "strata/engine/sampler.h"
#include "strata/engine/speculator.h"

namespace strata::engine {

struct SpecStats {
  int64_t windows = 0;          // verify windows (every trunk pass after the prompt)
  int64_t drafted = 0;          // draft tokens put in windows
  int64_t accepted = 0;         // of those, kept
  int64_t mtp_windows = 0, mtp_drafted = 0, mtp_accepted = 0;
  int64_t lookup_windows = 0, lookup_drafted = 0, lookup_accepted = 0;

  double acceptance_rate() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0; }
  // Accepted drafts per window, and tokens per window (accepted + the trunk's own).
  double accepted_per_window() const { return windows > 0 ? static_cast<double>(accepted) / windows : 0.0; }
  double tokens_per_window() const { return windows > 0 ? static_cast<double>(accepted + windows) / windows : 0.0; }
  // One line for stderr, e.g. "spec: 12 windows, 30 drafted, 21 accepted (70.0%), 1.75 accepted
  // / 2.75 tokens per window; mtp 8 windows 24/17, lookup 4 windows 6/4".
  std::string summary() const;
};

struct GenerateOptions {
  int n_generate = 16;
  SpecConfig spec;
  bool record_logits = false;       // trunk logits of every position run: [P + N - 1, vocab]
  bool record_mtp_logits = false;   // MTP draft logits of every slot: [P + N - 1, vocab]
};

struct GenerateResult {
  std::vector<int32_t> ids;         // generated, up to and including a stop
  int64_t prompt_tokens = 0;
  SpecStats stats;
  std::vector<float> logits;
  std::vector<float> mtp_logits;
  double prefill_s = 0.0, decode_s = 0.0;
};

// Called with each generated token; returning false stops generation after it.
using TokenCallback = std::function<bool(int32_t)>;

Result<GenerateResult> generate(Backend& backend, Sampler& sampler, std::span<const int32_t> prompt,
                                const GenerateOptions& options, const TokenCallback& on_token);

}  // namespace strata::engine
