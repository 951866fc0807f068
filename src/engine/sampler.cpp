// The CPU sampler (order and tie rules in include/strata/engine/sampler.h).
//
// The vocabulary is ~248k entries, so nothing here sorts all of it unless it must: top-k
// is an nth_element, and top-p sorts a growing prefix (64, 512, ... entries) until the
// prefix holds the mass p, which for real logits is almost always the first round.
#include "strata/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace strata::engine {
namespace {

bool usable(float x) { return std::isfinite(x); }

}  // namespace

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  float best_value = 0.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    float v = logits[i];
    if (!usable(v)) continue;
    if (best < 0 || v > best_value) {
      best = static_cast<int32_t>(i);
      best_value = v;
    }
  }
  return best;
}

Result<Sampler> Sampler::create(SamplerConfig config) {
  if (!std::isfinite(config.temperature)) {
    return Status::error(fmt::format("sampler: temperature must be finite (got {})", config.temperature));
  }
  if (!(config.top_p > 0.0f && config.top_p <= 1.0f)) {
    return Status::error(fmt::format("sampler: top_p must be in (0, 1] (got {})", config.top_p));
  }
  if (!(config.min_p >= 0.0f && config.min_p <= 1.0f)) {
    return Status::error(fmt::format("sampler: min_p must be in [0, 1] (got {})", config.min_p));
  }
  return Sampler(config);
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

std::vector<TokenProb> Sampler::distribution(std::span<const float> logits) {
  std::vector<TokenProb> out;
  if (greedy()) {
    int32_t id = argmax(logits);
    if (id >= 0) out.push_back({id, 1.0});
    return out;
  }
  const double inv_t = 1.0 / config_.temperature;
  // Candidates ranked by (logit desc, id asc); temperature is a positive scale, so ranking
  // logits ranks z as well.
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  order_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (usable(logits[i])) order_.push_back(static_cast<int32_t>(i));
  }
  if (order_.empty()) return out;

  // 2. top-k
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < order_.size()) {
    std::nth_element(order_.begin(), order_.begin() + config_.top_k, order_.end(), before);
    order_.resize(config_.top_k);
  }

  // 3. softmax over the kept, in double
  float max_logit = logits[order_[0]];
  for (int32_t id : order_) max_logit = std::max(max_logit, logits[id]);
  probs_.resize(logits.size());
  double sum = 0.0;
  for (int32_t id : order_) {
    double e = std::exp((static_cast<double>(logits[id]) - max_logit) * inv_t);
    probs_[id] = e;
    sum += e;
  }
  for (int32_t id : order_) probs_[id] /= sum;

  // 4. top-p: sort a growing prefix until it holds the mass
  if (config_.top_p < 1.0f) {
    size_t sorted = 0, keep = order_.size();
    for (size_t m = 64;; m *= 8) {
      size_t take = std::min(m, order_.size());
      std::partial_sort(order_.begin(), order_.begin() + take, order_.end(), before);
      double cum = 0.0;
      size_t i = 0;
      for (; i < take; ++i) {
        cum += probs_[order_[i]];
        if (cum >= config_.top_p) break;
      }
      if (i < take) {
        keep = i + 1;
        break;
      }
      sorted = take;
      if (sorted == order_.size()) break;  // rounding left the total under p: keep all
    }
    order_.resize(keep);
    double kept = 0.0;
    for (int32_t id : order_) kept += probs_[id];
    for (int32_t id : order_) probs_[id] /= kept;
  }

  // 5. min-p, relative to the most probable kept token
  if (config_.min_p > 0.0f) {
    double p_max = 0.0;
    for (int32_t id : order_) p_max = std::max(p_max, probs_[id]);
    const double floor = config_.min_p * p_max;
    std::erase_if(order_, [&](int32_t id) { return probs_[id] < floor; });
    double kept = 0.0;
    for (int32_t id : order_) kept += probs_[id];
    for (int32_t id : order_) probs_[id] /= kept;
  }

  std::sort(order_.begin(), order_.end());
  out.reserve(order_.size());
  for (int32_t id : order_) out.push_back({id, probs_[id]});
  return out;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (greedy()) return argmax(logits);
  std::vector<TokenProb> dist = distribution(logits);
  if (dist.empty()) return -1;
  // 6. inverse CDF in ascending id; the last token absorbs rounding.
  double u = uniform(), cum = 0.0;
  for (const TokenProb& t : dist) {
    cum += t.prob;
    if (u < cum) return t.id;
  }
  return dist.back().id;
}

}  // namespace strata::engine
