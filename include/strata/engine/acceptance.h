// Verifying a window of drafts against the trunk (docs/SPEC.md §Acceptance).
//
// A window runs [x, d_1 .. d_k] through the trunk; row i's distribution p_i scores the token
// at the position of d_{i+1} (row k scores the token after the last draft). The verdict keeps
// the drafts d_1 .. d_m and adds one token of the trunk's own, so a window always yields
// m + 1 tokens (0 <= m <= k).
//
//   greedy:  m = the longest prefix with d_{i+1} == argmax(row i); the extra token is
//            argmax(row m).
//   sampled: the exact speculative-sampling rule. For i = 0, 1, ...: accept d_{i+1} with
//            probability min(1, p_i(d) / q_i(d)); on the first rejection draw the extra
//            token from the residual norm(max(0, p_i - q_i)) and stop; when every draft is
//            accepted draw it from p_k. Then each emitted token is distributed exactly as
//            plain sampling from p (Leviathan et al. 2023, Chen et al. 2023), whatever q is,
//            provided d_{i+1} was drawn from q_i (or q_i is the point mass on a draft that was
//            chosen without randomness, as prompt lookup's are).
//
// Distributions are the sampler's: sparse, ascending id, probabilities summing to 1
// (engine::Sampler::distribution). Draws use the sampler's inverse-CDF rule (ascending id,
// first cumulative mass above u) on u in [0, 1) from a 53-bit mt19937_64 draw.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "strata/engine/sampler.h"

namespace strata::engine {

using Distribution = std::vector<TokenProb>;

struct Verdict {
  int accepted = 0;     // m: drafts kept
  int32_t next = -1;    // the trunk's own token after them
};

// The uniform source of the sampled rule: u in [0, 1) from the top 53 bits of mt19937_64.
class Uniform {
 public:
  explicit Uniform(uint64_t seed) : rng_(seed) {}
  double operator()() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 rng_;
};

// Probability of `id` under d (0 when absent).
double prob_of(const Distribution& d, int32_t id);

// The token whose cumulative mass (ascending id) first exceeds u; the last token absorbs
// rounding. -1 for an empty distribution.
int32_t draw(const Distribution& d, double u);

// min(1, p(d) / q(d)): the chance the sampled rule keeps draft d (q(d) > 0 by construction).
double acceptance_probability(const Distribution& p, const Distribution& q, int32_t draft);

// norm(max(0, p - q)), ascending id. When p <= q everywhere (p == q) the rule never rejects
// and the residual is unused; it is then p itself, so the result is always a distribution.
Distribution residual(const Distribution& p, const Distribution& q);

// Greedy verdict: target_argmax[i] is row i's argmax, i = 0 .. k (k = drafts.size()).
Verdict accept_greedy(std::span<const int32_t> drafts, std::span<const int32_t> target_argmax);

// Sampled verdict: p has k + 1 rows, q has k (q[i] is the distribution d_{i+1} was drawn from).
Verdict accept_sampled(std::span<const int32_t> drafts, std::span<const Distribution> q,
                       std::span<const Distribution> p, Uniform& u);

}  // namespace strata::engine
