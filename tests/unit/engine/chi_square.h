// Pearson's chi-square goodness-of-fit p-value, for the sampled-acceptance tests: the upper
// tail of the chi-square distribution through the regularized incomplete gamma function
// (series below a + 1, Lentz's continued fraction above; Numerical Recipes §6.2).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace strata::testing {

// Q(a, x) = Gamma(a, x) / Gamma(a).
inline double gamma_q(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_front = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && std::fabs(term) > std::fabs(sum) * 1e-16; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_front);
  }
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_front) * h;
}

// p-value of observed counts against expected probabilities (cells with probability 0 must
// have no counts; they are left out, as are their degrees of freedom).
inline double chi_square_p(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double stat = 0.0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0.0) {
      if (counts[i] > 0) return 0.0;
      continue;
    }
    const double e = probs[i] * static_cast<double>(n);
    stat += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  return gamma_q(0.5 * (cells - 1), 0.5 * stat);
}

}  // namespace strata::testing
