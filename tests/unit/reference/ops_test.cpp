// Reference primitives against straightforward math (spec/model.md §3).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "strata/reference/ops.h"

namespace strata::reference {
namespace {

std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(Ops, RmsNorm) {
  const auto x = randn(40, 1), w = randn(40, 2);
  std::vector<float> y(40);
  rms_norm(x, w, 1e-6f, y);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double r = 1.0 / std::sqrt(ss / 40 + 1e-6);
  for (int i = 0; i < 40; ++i) EXPECT_NEAR(y[i], x[i] * r * w[i], 1e-6);
}

TEST(Ops, GroupedRmsNormHasOneStatisticPerGroup) {
  auto x = randn(12, 3);
  for (int i = 4; i < 8; ++i) x[i] *= 100.0f;  // a loud middle group must not affect the others
  const std::vector<float> w(12, 1.0f);
  std::vector<float> y(12), part(4);
  grouped_rms_norm(x, w, 4, 1e-6f, y);
  for (int g = 0; g < 3; ++g) {
    rms_norm(std::span(x).subspan(g * 4, 4), std::span(w).subspan(g * 4, 4), 1e-6f, part);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(y[g * 4 + i], part[i]);
  }
}

TEST(Ops, GatedNormUsesSigmoidAndPlainWeight) {
  const auto x = randn(8, 4), z = randn(8, 5), w = randn(8, 6);
  std::vector<float> y(8), n(8);
  rms_norm_gated(x, z, w, 1e-6f, y);
  const std::vector<float> ones(8, 1.0f);
  rms_norm(x, ones, 1e-6f, n);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], n[i] * w[i] / (1 + std::exp(-z[i])), 1e-6);
}

TEST(Ops, L2NormEpsInsideTheSum) {
  std::vector<float> x = {3.0f, 4.0f};
  l2_norm(x);
  EXPECT_NEAR(x[0], 3.0 / std::sqrt(25.0 + 1e-6), 1e-7);
  std::vector<float> zero(4, 0.0f);
  l2_norm(zero);  // finite: eps keeps the denominator away from 0
  for (float v : zero) EXPECT_EQ(v, 0.0f);
}

TEST(Ops, Activations) {
  EXPECT_NEAR(silu(1.5f), 1.5 / (1 + std::exp(-1.5)), 1e-7);
  EXPECT_EQ(softplus(25.0f), 25.0f);  // threshold 20: identity above
  EXPECT_NEAR(softplus(-3.0f), std::log1p(std::exp(-3.0)), 1e-7);
  EXPECT_NEAR(softplus(20.0f), std::log1p(std::exp(20.0)), 1e-5);
}

// Plain rotate-half RoPE on the first n_rot dims for a text position.
TEST(Ops, RopeRotateHalfPartial) {
  Rope rope{8, 10000.0f, {11, 11, 10}};
  auto x = randn(16, 7);
  auto y = x;
  rope_apply(y, rope_angles(rope, text_pos(37)));
  for (int i = 0; i < 4; ++i) {
    const double f = 37.0 * std::pow(10000.0, -2.0 * i / 8.0);
    EXPECT_NEAR(y[i], x[i] * std::cos(f) - x[i + 4] * std::sin(f), 2e-5);
    EXPECT_NEAR(y[i + 4], x[i + 4] * std::cos(f) + x[i] * std::sin(f), 2e-5);
  }
  for (int i = 8; i < 16; ++i) EXPECT_EQ(y[i], x[i]);  // dims past n_rot untouched
  // Position 0 is the identity.
  auto z = x;
  rope_apply(z, rope_angles(rope, text_pos(0)));
  EXPECT_EQ(z, x);
}

// Interleaved M-RoPE: slot i takes H when i%3==1 (i < 3*sec[1]), W when i%3==2 (i < 3*sec[2]), else T.
TEST(Ops, RopeInterleavedSections) {
  Rope rope{64, 1e7f, {11, 11, 10}};
  const RopeAngles a = rope_angles(rope, {5, 7, 9});
  for (int i = 0; i < 32; ++i) {
    const int64_t p = (i % 3 == 1 && i < 33) ? 7 : (i % 3 == 2 && i < 30) ? 9 : 5;
    const RopeAngles plain = rope_angles(rope, text_pos(p));
    EXPECT_EQ(a.cos[i], plain.cos[i]) << i;
  }
  EXPECT_EQ(rope_angles(rope, {5, 7, 9}).cos[29], rope_angles(rope, text_pos(9)).cos[29]);
  EXPECT_EQ(rope_angles(rope, {5, 7, 9}).cos[31], rope_angles(rope, text_pos(7)).cos[31]);
  EXPECT_EQ(rope_angles(rope, {5, 7, 9}).cos[30], rope_angles(rope, text_pos(5)).cos[30]);
}

TEST(Ops, SoftmaxSumsToOne) {
  std::vector<float> x = {1000.0f, 1001.0f, 999.0f};
  softmax(x);
  EXPECT_NEAR(x[0] + x[1] + x[2], 1.0, 1e-6);
  EXPECT_NEAR(x[1] / x[0], std::exp(1.0), 1e-4);
}

TEST(Ops, TopKOrderAndTieRule) {
  const std::vector<float> x = {0.5f, 2.0f, 0.5f, 2.0f, -1.0f, 0.5f};
  EXPECT_EQ(top_k(x, 3), (std::vector<int32_t>{1, 3, 0}));
  EXPECT_EQ(top_k(x, 5), (std::vector<int32_t>{1, 3, 0, 2, 5}));
  EXPECT_EQ(top_k(x, 10).size(), 6u);
}

TEST(Ops, CausalConvWithDilationAndHistory) {
  // 2 channels, kernel 3, dilation 2: y[t] = silu(w0 x[t-4] + w1 x[t-2] + w2 x[t]).
  const std::vector<float> w = {0.5f, -1.0f, 2.0f, 1.0f, 1.0f, 1.0f};
  const auto x = randn(7 * 2, 9);
  std::vector<float> hist(4 * 2, 0.0f), y(7 * 2);
  causal_conv_silu(w.data(), 2, 3, 2, hist, x.data(), 7, y.data());
  auto at = [&](int t, int c) { return t < 0 ? 0.0f : x[t * 2 + c]; };
  for (int t = 0; t < 7; ++t) {
    for (int c = 0; c < 2; ++c) {
      const float pre = w[c * 3] * at(t - 4, c) + w[c * 3 + 1] * at(t - 2, c) + w[c * 3 + 2] * at(t, c);
      EXPECT_NEAR(y[t * 2 + c], silu(pre), 1e-6);
    }
  }
  // Streaming in two calls gives the same output as one call.
  std::vector<float> h2(4 * 2, 0.0f), y2(7 * 2);
  causal_conv_silu(w.data(), 2, 3, 2, h2, x.data(), 3, y2.data());
  causal_conv_silu(w.data(), 2, 3, 2, h2, x.data() + 6, 4, y2.data() + 6);
  EXPECT_EQ(y, y2);
  EXPECT_EQ(hist, h2);
}

}  // namespace
}  // namespace strata::reference
