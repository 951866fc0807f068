// Router (softmax, top-k, renormalisation, tie rule) and the HC mix/combine against the
// formulas of spec/model.md §4 and §8, on tensors built in memory.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "strata/reference/hc.h"
#include "strata/reference/moe.h"
#include "strata/reference/ops.h"

namespace strata::reference {
namespace {

TEST(Router, SoftmaxTopKRenormalise) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, -1.0f};
  const Routing r = route(logits, 2);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2}));
  const double e1 = std::exp(2.0), e2 = std::exp(1.0);
  EXPECT_NEAR(r.weights[0], e1 / (e1 + e2), 1e-6);
  EXPECT_NEAR(r.weights[1], e2 / (e1 + e2), 1e-6);
}

TEST(Router, TiesKeepTheLowerExpertId) {
  const std::vector<float> logits = {1.0f, 3.0f, 1.0f, 3.0f, 1.0f};
  EXPECT_EQ(route(logits, 3).experts, (std::vector<int32_t>{1, 3, 0}));
}

// An in-memory F32 tensor.
struct OwnedTensor {
  std::vector<float> data;
  model::Tensor t;
  OwnedTensor(std::vector<float> values, int64_t cols, int64_t rows) : data(std::move(values)) {
    t.ne = {cols, rows, 1, 1};
    t.data = reinterpret_cast<const uint8_t*>(data.data());
    t.row_bytes = cols * 4;
    t.f32 = data.data();
  }
};

std::vector<float> randn(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(Hc, MixAndCombineFollowTheFormulas) {
  const int64_t S = 3, H = 5, W = S * H, R = 4, T = 2;
  OwnedTensor norm(randn(W, 1, 0.1f), W, 1), down(randn(R * W, 2, 0.3f), W, R), up(randn(W * R, 3, 0.3f), R, W),
      inject(randn(S * W, 4, 0.3f), W, S);
  for (float& x : norm.data) x += 1.0f;
  const std::vector<float> x = randn(T * W, 5, 1.0f);
  ThreadPool pool(1);
  const HcMix mix = hc_mix({&norm.t, &down.t, &up.t, &inject.t}, S, H, 1e-6f, x, T, pool);

  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> xn(W);
    for (int64_t s = 0; s < S; ++s) {
      double ss = 0;
      for (int64_t j = 0; j < H; ++j) ss += double(x[t * W + s * H + j]) * x[t * W + s * H + j];
      const double r = 1.0 / std::sqrt(ss / H + 1e-6);
      for (int64_t j = 0; j < H; ++j) xn[s * H + j] = x[t * W + s * H + j] * r * norm.data[s * H + j];
    }
    std::vector<double> lo(R);
    for (int64_t i = 0; i < R; ++i) {
      double a = 0;
      for (int64_t c = 0; c < W; ++c) a += down.data[i * W + c] * xn[c];
      a /= S;
      lo[i] = a / (1 + std::exp(-a));
    }
    for (int64_t j = 0; j < H; ++j) {
      double u = 0;
      for (int64_t s = 0; s < S; ++s) {
        double g = 0;
        for (int64_t i = 0; i < R; ++i) g += up.data[(s * H + j) * R + i] * lo[i];
        u += xn[s * H + j] / (1 + std::exp(-g));
      }
      EXPECT_NEAR(mix.u[t * H + j], u / S, 1e-5);
    }
    for (int64_t s = 0; s < S; ++s) {
      double a = 0;
      for (int64_t c = 0; c < W; ++c) a += inject.data[s * W + c] * xn[c];
      EXPECT_NEAR(mix.alpha[t * S + s], 2.0 / (1 + std::exp(-a / S)), 1e-5);
    }
  }

  std::vector<float> res = x;
  const std::vector<float> y = randn(T * H, 6, 1.0f);
  hc_combine(res, y, mix.alpha, S, H, T);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t j = 0; j < H; ++j) {
        EXPECT_FLOAT_EQ(res[t * W + s * H + j], x[t * W + s * H + j] + mix.alpha[t * S + s] * y[t * H + j]);
      }
    }
  }
}

}  // namespace
}  // namespace strata::reference
