// Choosing the next token from the head's logits, on the CPU, in one fixed order:
//
//   1. temperature   z = logit / T; T <= 0 means greedy (argmax, nothing below runs)
//   2. top-k         keep the k largest z (k <= 0: off)
//   3. softmax       over what is kept
//   4. top-p         keep the smallest most-probable set whose mass reaches p (p >= 1: off)
//   5. min-p         keep p_i >= min_p * max p (min_p <= 0: off)
//   6. draw          u in [0, 1) from the seeded generator; walk the kept tokens in
//                    ascending id and take the first whose cumulative mass exceeds u
//
// Ties are broken toward the lower token id everywhere: greedy picks the lowest id among
// equal maxima, and the top-k / top-p cuts rank equal values by id. Logits that are -inf or
// NaN are never chosen. The generator is std::mt19937_64 (its output is fixed by the C++
// standard) and u is built from its top 53 bits, so a seed gives the same tokens on every
// platform.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "strata/common/status.h"

namespace strata::engine {

struct SamplerConfig {
  float temperature = 0.0f;  // <= 0: greedy (the default)
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  uint64_t seed = 0;
};

struct TokenProb {
  int32_t id;
  double prob;
};

class Sampler {
 public:
  // Rejects a non-finite temperature, top_p outside (0, 1] and min_p outside [0, 1].
  static Result<Sampler> create(SamplerConfig config);

  // The next token. Fails only when no logit is finite (returns -1).
  int32_t sample(std::span<const float> logits);

  // What sample() draws from: the kept tokens, ascending id, probabilities summing to 1.
  // Greedy gives the argmax alone with probability 1.
  std::vector<TokenProb> distribution(std::span<const float> logits);

  void reseed(uint64_t seed) { rng_.seed(seed); }
  const SamplerConfig& config() const { return config_; }
  bool greedy() const { return config_.temperature <= 0.0f; }

 private:
  explicit Sampler(SamplerConfig config) : config_(config), rng_(config.seed) {}
  double uniform();  // [0, 1), 53 bits

  SamplerConfig config_;
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;  // scratch: candidate ids
  std::vector<double> probs_;   // scratch: by candidate position
};

// Index of the largest finite logit, the lowest index among equals; -1 if none is finite.
int32_t argmax(std::span<const float> logits);

}  // namespace strata::engine
