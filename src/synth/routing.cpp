// Routing skew. A real router is uneven: on the released model the most-used 55% of experts
// take about 88% of the routing (ExLlamaV3's histogram, spec/anchors.md §4), and the VRAM
// expert cache's hit rate depends on exactly that. There is no router bias tensor, so the
// skew is put into the row norms: expert e's router row is scaled by s_e = exp(spread * z_e),
// z_e the standard-normal quantiles. For hidden states u in no particular direction the
// logits w_e . u are then independent normals with std proportional to s_e, and an expert
// with a wider logit lands in the top-k more often; spread = 0 is uniform routing.
//
// The spread is calibrated by a fixed Monte Carlo on exactly that model (deterministic, the
// same numbers on every machine) and checked against real random hidden states through the
// generated router weights in tests/unit/synth/routing_test.cpp.
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <tuple>
#include <vector>

#include "internal.h"

namespace strata::synth::detail {

double Rng::normal() {
  // Box-Muller; 1 - unit() keeps the log argument in (0, 1].
  const double u1 = 1.0 - unit(), u2 = unit();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

namespace {

// Inverse of the standard normal CDF by bisection on erfc: only E values per plan are needed,
// and this is exact to double precision without tables.
double normal_quantile(double p) {
  double lo = -10.0, hi = 10.0;
  for (int i = 0; i < 64; ++i) {
    const double mid = 0.5 * (lo + hi);
    const double cdf = 0.5 * std::erfc(-mid / std::sqrt(2.0));
    (cdf < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::vector<double> quantiles(uint32_t n) {
  std::vector<double> z(n);
  for (uint32_t i = 0; i < n; ++i) z[i] = normal_quantile((i + 0.5) / n);
  return z;
}

// Number of "most-used" experts the share is measured on (280 of 512 in the measurement).
uint32_t top_group(uint32_t n_experts) {
  return static_cast<uint32_t>(std::max<long>(1, std::lround(0.55 * n_experts)));
}

// Expected share of top-k selections that go to the top_group experts with the largest
// scales, for a given spread, over fixed draws Z [tokens x experts].
double share_for(double spread, const std::vector<double>& z, const std::vector<float>& draws, uint32_t n,
                 uint32_t k) {
  std::vector<double> scale(n);
  for (uint32_t e = 0; e < n; ++e) scale[e] = std::exp(spread * z[e]);
  const uint32_t first_top = n - top_group(n);  // z is ascending: the top group is the tail
  const size_t tokens = draws.size() / n;
  // Top-k by insertion into a sorted list of k: almost every logit fails the first compare,
  // which makes this several times faster than nth_element (the bisection calls it often).
  std::vector<double> best(k);
  std::vector<uint32_t> who(k);
  uint64_t hits = 0;
  for (size_t t = 0; t < tokens; ++t) {
    std::fill(best.begin(), best.end(), -1e300);
    for (uint32_t e = 0; e < n; ++e) {
      const double l = scale[e] * draws[t * n + e];
      if (l <= best[k - 1]) continue;
      uint32_t j = k - 1;
      for (; j > 0 && best[j - 1] < l; --j) {
        best[j] = best[j - 1];
        who[j] = who[j - 1];
      }
      best[j] = l;
      who[j] = e;
    }
    for (uint32_t j = 0; j < k; ++j) hits += who[j] >= first_top ? 1 : 0;
  }
  return static_cast<double>(hits) / static_cast<double>(tokens * k);
}

SkewCalibration calibrate_skew_uncached(double target, uint32_t n_experts, uint32_t top_k) {
  // 1024 tokens x E experts: the share's Monte Carlo error is about 0.003, well inside the
  // tolerance a test of the generated weights can check anyway.
  constexpr size_t kTokens = 1024;
  constexpr double kMaxSpread = 3.0;
  const std::vector<double> z = quantiles(n_experts);
  std::vector<float> draws(kTokens * n_experts);
  Rng rng{0x5EEDC0FFEEull};
  for (float& d : draws) d = static_cast<float>(rng.normal());

  SkewCalibration out;
  const double uniform = share_for(0.0, z, draws, n_experts, top_k);
  if (target <= uniform) return {0.0, uniform};
  const double most = share_for(kMaxSpread, z, draws, n_experts, top_k);
  if (target >= most) return {kMaxSpread, most};  // too few experts for this skew
  double lo = 0.0, hi = kMaxSpread;
  for (int i = 0; i < 16; ++i) {  // spread to 5e-5: far below the Monte Carlo error
    const double mid = 0.5 * (lo + hi);
    (share_for(mid, z, draws, n_experts, top_k) < target ? lo : hi) = mid;
  }
  out.log_spread = 0.5 * (lo + hi);
  out.reached = share_for(out.log_spread, z, draws, n_experts, top_k);
  return out;
}

}  // namespace

SkewCalibration calibrate_skew(double target, uint32_t n_experts, uint32_t top_k) {
  // Plans are made often (tests, the bench) with the same few settings: remember the answers.
  using Key = std::tuple<double, uint32_t, uint32_t>;
  static std::mutex mutex;
  static std::map<Key, SkewCalibration> cache;
  const Key key{target, n_experts, top_k};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const SkewCalibration out = calibrate_skew_uncached(target, n_experts, top_k);
  std::lock_guard<std::mutex> lock(mutex);
  cache.emplace(key, out);
  return out;
}

std::vector<float> router_scales(uint64_t seed, int32_t layer, uint32_t n_experts, double spread) {
  const std::vector<double> z = quantiles(n_experts);
  std::vector<uint32_t> perm(n_experts);
  std::iota(perm.begin(), perm.end(), 0u);
  // Fisher-Yates with our own RNG: std::shuffle's output differs between standard libraries.
  Rng rng{splitmix64(seed ^ 0x4075E7ull) + static_cast<uint64_t>(layer + 1) * 0x9E3779B97F4A7C15ull};
  for (uint32_t i = n_experts; i > 1; --i) std::swap(perm[i - 1], perm[rng.next() % i]);
  std::vector<float> s(n_experts);
  for (uint32_t e = 0; e < n_experts; ++e) s[e] = static_cast<float>(std::exp(spread * z[perm[e]]));
  return s;
}

}  // namespace strata::synth::detail
