// The sampler: greedy and its tie rule, each filter on its own, the order of the filters,
// seeded determinism, and sampled frequencies against the distribution.
#include <cmath>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "strata/engine/sampler.h"

namespace strata::engine {
namespace {

Sampler make(SamplerConfig c) {
  Result<Sampler> s = Sampler::create(c);
  EXPECT_TRUE(s.ok()) << s.error();
  return std::move(s).value();
}

std::vector<int32_t> ids_of(const std::vector<TokenProb>& d) {
  std::vector<int32_t> out;
  for (const TokenProb& t : d) out.push_back(t.id);
  return out;
}

std::vector<float> logits_of_probs(const std::vector<double>& p) {
  std::vector<float> out;
  for (double x : p) out.push_back(x > 0 ? static_cast<float>(std::log(x)) : -INFINITY);
  return out;
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  Sampler s = make({});
  std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, NAN};
  EXPECT_EQ(s.sample(logits), 1);
  EXPECT_EQ(argmax(logits), 1);
  std::vector<float> none = {NAN, -INFINITY};
  EXPECT_EQ(s.sample(none), -1);
  auto d = s.distribution(logits);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 1);
}

TEST(Sampler, RejectsBadConfig) {
  EXPECT_FALSE(Sampler::create({.temperature = NAN}).ok());
  EXPECT_FALSE(Sampler::create({.temperature = 1.0f, .top_p = 0.0f}).ok());
  EXPECT_FALSE(Sampler::create({.temperature = 1.0f, .top_p = 1.5f}).ok());
  EXPECT_FALSE(Sampler::create({.temperature = 1.0f, .min_p = -0.1f}).ok());
}

TEST(Sampler, TemperatureScalesSoftmax) {
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4 at T = 1
  auto d1 = make({.temperature = 1.0f}).distribution(logits);
  EXPECT_NEAR(d1[1].prob, 0.75, 1e-6);
  // T = 0.5 squares the odds: 1 : 9.
  auto d2 = make({.temperature = 0.5f}).distribution(logits);
  EXPECT_NEAR(d2[1].prob, 0.9, 1e-6);
}

TEST(Sampler, TopKKeepsLargestAndBreaksTiesByLowerId) {
  std::vector<float> logits = {1.0f, 5.0f, 3.0f, 3.0f, 0.0f};
  auto d = make({.temperature = 1.0f, .top_k = 2}).distribution(logits);
  EXPECT_EQ(ids_of(d), (std::vector<int32_t>{1, 2}));  // 2 and 3 tie; 2 is kept
}

TEST(Sampler, TopPKeepsSmallestSetReachingMass) {
  auto logits = logits_of_probs({0.1, 0.4, 0.3, 0.2});
  EXPECT_EQ(ids_of(make({.temperature = 1.0f, .top_p = 0.7f}).distribution(logits)), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ids_of(make({.temperature = 1.0f, .top_p = 0.71f}).distribution(logits)), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ids_of(make({.temperature = 1.0f, .top_p = 0.05f}).distribution(logits)), (std::vector<int32_t>{1}));
  auto d = make({.temperature = 1.0f, .top_p = 0.7f}).distribution(logits);
  EXPECT_NEAR(d[0].prob, 0.4 / 0.7, 1e-6);
}

TEST(Sampler, MinPIsRelativeToTheMostProbable) {
  auto logits = logits_of_probs({0.5, 0.3, 0.15, 0.05});
  // min_p 0.25: keep p >= 0.125
  EXPECT_EQ(ids_of(make({.temperature = 1.0f, .min_p = 0.25f}).distribution(logits)), (std::vector<int32_t>{0, 1, 2}));
}

TEST(Sampler, FiltersRunInOrderKThenPThenMin) {
  // p = .35 .25 .2 .1 .1 (ids 0..4).
  auto logits = logits_of_probs({0.35, 0.25, 0.2, 0.1, 0.1});
  // top-k 3 renormalises to .4375 .3125 .25; top-p .7 then needs ids 0, 1 (.75).
  // (top-p first on the raw distribution would need 0, 1, 2 for .8.)
  auto d = make({.temperature = 1.0f, .top_k = 3, .top_p = 0.7f}).distribution(logits);
  EXPECT_EQ(ids_of(d), (std::vector<int32_t>{0, 1}));
  // top-p .9 keeps 0..3 (.9); renormalised .3889 .2778 .2222 .1111; min-p .5 keeps
  // p >= .1944: 0, 1, 2. (min-p first on the raw distribution would keep 0, 1, 2 too, but
  // top-p after it would then need only 0, 1, 2 of .8/.8: same set; so check the values.)
  auto e = make({.temperature = 1.0f, .top_p = 0.9f, .min_p = 0.5f}).distribution(logits);
  EXPECT_EQ(ids_of(e), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(e[0].prob, 0.35 / 0.8, 1e-6);
  // Temperature comes before top-k/p: at T = 0.25 the top token holds > .7 alone.
  auto f = make({.temperature = 0.25f, .top_p = 0.7f}).distribution(logits);
  EXPECT_EQ(ids_of(f), (std::vector<int32_t>{0}));
}

TEST(Sampler, SeededAndDeterministic) {
  auto logits = logits_of_probs({0.2, 0.2, 0.2, 0.2, 0.2});
  Sampler a = make({.temperature = 1.0f, .seed = 42});
  Sampler b = make({.temperature = 1.0f, .seed = 42});
  std::vector<int32_t> sa, sb;
  for (int i = 0; i < 64; ++i) {
    sa.push_back(a.sample(logits));
    sb.push_back(b.sample(logits));
  }
  EXPECT_EQ(sa, sb);
  // Pinned: mt19937_64 is specified by the standard, so these are the same everywhere.
  Sampler c = make({.temperature = 1.0f, .seed = 1});
  std::vector<int32_t> first;
  for (int i = 0; i < 8; ++i) first.push_back(c.sample(logits));
  Sampler c2 = make({.temperature = 1.0f, .seed = 1});
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c2.sample(logits), first[i]);
  c.reseed(1);
  EXPECT_EQ(c.sample(logits), first[0]);
}

TEST(Sampler, FrequenciesMatchTheDistribution) {
  const std::vector<double> p = {0.05, 0.5, 0.25, 0.15, 0.05};
  auto logits = logits_of_probs(p);
  Sampler s = make({.temperature = 1.0f, .seed = 1234});
  const int n = 100000;
  std::map<int32_t, int> count;
  for (int i = 0; i < n; ++i) ++count[s.sample(logits)];
  for (size_t i = 0; i < p.size(); ++i) {
    double sigma = std::sqrt(p[i] * (1 - p[i]) / n);
    EXPECT_NEAR(count[static_cast<int32_t>(i)] / double(n), p[i], 5 * sigma) << "token " << i;
  }
  // With top-k 2 only ids 1 and 2 appear, in ratio 2 : 1.
  Sampler k = make({.temperature = 1.0f, .top_k = 2, .seed = 99});
  std::map<int32_t, int> kc;
  for (int i = 0; i < n; ++i) ++kc[k.sample(logits)];
  EXPECT_EQ(kc.size(), 2u);
  EXPECT_NEAR(kc[1] / double(n), 2.0 / 3.0, 0.01);
}

TEST(Sampler, LargeVocabularyTopP) {
  // 248k logits with a few large ones: the growing-prefix top-p must find the same set a
  // full sort would.
  std::vector<float> logits(248320, -5.0f);
  logits[7] = 10.0f;
  logits[100000] = 9.5f;
  logits[248000] = 9.0f;
  auto d = make({.temperature = 1.0f, .top_p = 0.95f}).distribution(logits);
  double kept = 0;
  for (const TokenProb& t : d) kept += t.prob;
  EXPECT_NEAR(kept, 1.0, 1e-9);
  EXPECT_GE(d.size(), 3u);
  EXPECT_EQ(d.front().id, 7);
  // The tail is uniform: any extra tokens kept must be the lowest ids of the tail.
  if (d.size() > 3) {
    EXPECT_EQ(d[1].id, 0);
  }
}

}  // namespace
}  // namespace strata::engine
