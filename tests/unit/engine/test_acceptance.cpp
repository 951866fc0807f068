// The acceptance rules: the greedy prefix, and the sampled rule checked two ways.
//
// Exact: for a window of two drafts on a vocabulary of 5, the probability of every pair of
// first two emitted tokens is enumerated from the rule's pieces (acceptance_probability,
// residual) and must equal plain sampling's p1(y1) p2(y2 | y1) to 1e-12; the same enumeration
// with two wrong rules (accept every draft the target allows; accept with p(d) ignoring q) is
// off by more than 0.01, so the check has teeth.
// Statistical: the driver accept_sampled itself, 200k windows with drafts drawn from q, and a
// chi-square goodness-of-fit of the first two emitted tokens against that exact joint: fail
// below p = 1e-3. A driver with the wrong rule fails the same test (the negative control).
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "chi_square.h"
#include "strata/engine/acceptance.h"

namespace strata::engine {
namespace {

constexpr int kVocab = 5;
constexpr double kPValueFloor = 1e-3;  // a correct rule fails this one time in a thousand seeds

Distribution random_distribution(std::mt19937_64& rng, double zero_chance) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Distribution d;
  double sum = 0.0;
  for (int id = 0; id < kVocab; ++id) {
    if (u(rng) < zero_chance) continue;
    const double w = 0.05 + u(rng);
    d.push_back({id, w});
    sum += w;
  }
  if (d.empty()) {
    d.push_back({static_cast<int32_t>(rng() % kVocab), 1.0});
    sum = 1.0;
  }
  for (TokenProb& t : d) t.prob /= sum;
  return d;
}

// A two-draft window: p1 scores the first position, p2[y1] the second after y1; q1 drafts d1,
// q2[d1] drafts d2 after it.
struct Case {
  Distribution p1, q1;
  std::vector<Distribution> p2, q2;
  Distribution p3;  // the row after two accepted drafts (its token is the third: not counted)

  static Case make(uint64_t seed) {
    std::mt19937_64 rng(seed);
    Case c;
    c.p1 = random_distribution(rng, 0.25);
    c.q1 = random_distribution(rng, 0.25);
    for (int i = 0; i < kVocab; ++i) {
      c.p2.push_back(random_distribution(rng, 0.25));
      c.q2.push_back(random_distribution(rng, 0.25));
    }
    c.p3 = random_distribution(rng, 0.0);
    return c;
  }

  std::vector<double> plain_joint() const {
    std::vector<double> j(kVocab * kVocab, 0.0);
    for (int a = 0; a < kVocab; ++a) {
      for (int b = 0; b < kVocab; ++b) j[a * kVocab + b] = prob_of(p1, a) * prob_of(p2[a], b);
    }
    return j;
  }
};

struct Rule {
  std::function<double(const Distribution&, const Distribution&, int32_t)> accept;
  std::function<Distribution(const Distribution&, const Distribution&)> residual;
};

const Rule kExact{acceptance_probability, residual};
// Accept whatever the target could emit: the bias of skipping the min(1, p/q) test.
const Rule kAcceptAllowed{[](const Distribution& p, const Distribution&, int32_t d) { return prob_of(p, d) > 0 ? 1.0 : 0.0; },
                          [](const Distribution& p, const Distribution&) { return p; }};
// The point-mass rule applied to a draft that was drawn from q.
const Rule kIgnoreQ{[](const Distribution& p, const Distribution&, int32_t d) { return prob_of(p, d); },
                    residual};

// The joint of the first two emitted tokens under `rule`, by enumeration; a window that emits
// one token is followed by plain sampling from p2.
std::vector<double> enumerate_joint(const Case& c, const Rule& rule) {
  std::vector<double> j(kVocab * kVocab, 0.0);
  for (int d1 = 0; d1 < kVocab; ++d1) {
    const double w1 = prob_of(c.q1, d1);
    if (w1 == 0.0) continue;
    const double a1 = rule.accept(c.p1, c.q1, d1);
    for (int d2 = 0; d2 < kVocab; ++d2) {
      const double w2 = prob_of(c.q2[d1], d2);
      if (w2 == 0.0) continue;
      const double a2 = rule.accept(c.p2[d1], c.q2[d1], d2);
      j[d1 * kVocab + d2] += w1 * a1 * w2 * a2;
      for (const TokenProb& y2 : rule.residual(c.p2[d1], c.q2[d1])) {
        j[d1 * kVocab + y2.id] += w1 * a1 * w2 * (1.0 - a2) * y2.prob;
      }
    }
    for (const TokenProb& y1 : rule.residual(c.p1, c.q1)) {
      for (const TokenProb& y2 : c.p2[y1.id]) j[y1.id * kVocab + y2.id] += w1 * (1.0 - a1) * y1.prob * y2.prob;
    }
  }
  return j;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(Acceptance, GreedyKeepsTheLongestMatchingPrefix) {
  const std::vector<int32_t> drafts = {4, 7, 1};
  Verdict v = accept_greedy(drafts, std::vector<int32_t>{4, 7, 9, 2});
  EXPECT_EQ(v.accepted, 2);
  EXPECT_EQ(v.next, 9);
  v = accept_greedy(drafts, std::vector<int32_t>{4, 7, 1, 2});
  EXPECT_EQ(v.accepted, 3);
  EXPECT_EQ(v.next, 2);
  v = accept_greedy(drafts, std::vector<int32_t>{5, 7, 1, 2});  // a later match does not count
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.next, 5);
  v = accept_greedy({}, std::vector<int32_t>{3});
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.next, 3);
}

TEST(Acceptance, PointMassDraftIsAcceptedWithTargetProbability) {
  const Distribution p = {{0, 0.5}, {2, 0.3}, {3, 0.2}};
  const Distribution q = {{2, 1.0}};
  EXPECT_DOUBLE_EQ(acceptance_probability(p, q, 2), 0.3);
  const Distribution r = residual(p, q);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, 0);
  EXPECT_NEAR(r[0].prob, 0.5 / 0.7, 1e-15);
  EXPECT_EQ(r[1].id, 3);
  EXPECT_NEAR(r[1].prob, 0.2 / 0.7, 1e-15);
  const Distribution same = residual(p, p);  // never used (nothing is rejected), but still a distribution
  ASSERT_EQ(same.size(), p.size());
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(same[i].prob, p[i].prob);
}

TEST(Acceptance, SampledRuleWithGreedyTargetIsTheGreedyRule) {
  Uniform u(7);
  const std::vector<int32_t> drafts = {1, 2};
  const std::vector<Distribution> q = {{{1, 1.0}}, {{2, 1.0}}};
  const std::vector<Distribution> p = {{{1, 1.0}}, {{3, 1.0}}, {{0, 1.0}}};
  const Verdict v = accept_sampled(drafts, q, p, u);
  EXPECT_EQ(v.accepted, 1);
  EXPECT_EQ(v.next, 3);
}

TEST(Acceptance, ExactEnumerationEqualsPlainSampling) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Case c = Case::make(seed);
    EXPECT_LT(max_diff(enumerate_joint(c, kExact), c.plain_joint()), 1e-12) << "seed " << seed;
  }
}

TEST(Acceptance, ExactEnumerationDetectsWrongRules) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Case c = Case::make(seed);
    EXPECT_GT(max_diff(enumerate_joint(c, kAcceptAllowed), c.plain_joint()), 0.01) << "seed " << seed;
    EXPECT_GT(max_diff(enumerate_joint(c, kIgnoreQ), c.plain_joint()), 0.01) << "seed " << seed;
  }
}

using Driver = std::function<Verdict(std::span<const int32_t>, std::span<const Distribution>,
                                     std::span<const Distribution>, Uniform&)>;

// The wrong driver of the negative control: keeps every draft the target could emit.
Verdict accept_allowed(std::span<const int32_t> drafts, std::span<const Distribution>,
                       std::span<const Distribution> p, Uniform& u) {
  Verdict v;
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (prob_of(p[i], drafts[i]) > 0.0) {
      ++v.accepted;
      continue;
    }
    v.next = draw(p[i], u());
    return v;
  }
  v.next = draw(p[drafts.size()], u());
  return v;
}

// p-value of the first two emitted tokens of n windows run by `driver`, against plain sampling.
double sampled_p_value(const Case& c, const Driver& driver, int n, uint64_t seed) {
  Uniform u(seed);
  std::vector<int64_t> counts(kVocab * kVocab, 0);
  for (int i = 0; i < n; ++i) {
    const int32_t d1 = draw(c.q1, u()), d2 = draw(c.q2[d1], u());
    const std::vector<int32_t> drafts = {d1, d2};
    const std::vector<Distribution> q = {c.q1, c.q2[d1]};
    const std::vector<Distribution> p = {c.p1, c.p2[d1], c.p3};
    const Verdict v = driver(drafts, q, p, u);
    std::vector<int32_t> out(drafts.begin(), drafts.begin() + v.accepted);
    out.push_back(v.next);
    if (out.size() == 1) out.push_back(draw(c.p2[out[0]], u()));  // the next window, plain
    ++counts[out[0] * kVocab + out[1]];
  }
  return testing::chi_square_p(counts, c.plain_joint());
}

TEST(Acceptance, SampledDriverMatchesPlainSamplingChiSquare) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const Case c = Case::make(seed);
    EXPECT_GT(sampled_p_value(c, accept_sampled, 200000, 100 + seed), kPValueFloor) << "seed " << seed;
  }
}

TEST(Acceptance, ChiSquareDetectsTheWrongDriver) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const Case c = Case::make(seed);
    EXPECT_LT(sampled_p_value(c, accept_allowed, 200000, 100 + seed), kPValueFloor) << "seed " << seed;
  }
}

TEST(Acceptance, ChiSquarePValueIsCalibrated) {
  // Known values: chi-square with 4 degrees of freedom, statistic 9.4877 -> 0.05.
  EXPECT_NEAR(testing::gamma_q(2.0, 9.4877 / 2), 0.05, 1e-4);
  EXPECT_NEAR(testing::gamma_q(12.0, 51.179 / 2), 0.001, 1e-5);  // 24 dof
  EXPECT_NEAR(testing::gamma_q(0.5, 3.841 / 2), 0.05, 1e-4);     // 1 dof
}

}  // namespace
}  // namespace strata::engine
