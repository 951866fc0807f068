// Statistics of the generated weights: routing skew under random hidden states (through the
// generated, dequantized router), and projections that keep the RMS of their input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "strata/quant/dequant.h"
#include "strata/synth/synth.h"

namespace strata::synth {
namespace {

Plan make(Options o) {
  auto plan = make_plan(o);
  EXPECT_TRUE(plan.ok()) << plan.error();
  return std::move(plan.value());
}

// Rows [0, n_rows) of a tensor as floats, generated in memory (no file).
std::vector<float> rows_of(const Plan& plan, const TensorPlan& t, uint64_t n_rows) {
  std::vector<uint8_t> bytes(n_rows * t.row_bytes());
  EXPECT_TRUE(generate(plan, t, 0, bytes).ok());
  std::vector<float> w(n_rows * static_cast<uint64_t>(t.ne[0]));
  EXPECT_TRUE(quant::dequantize_row(t.type, bytes.data(), w.data(), static_cast<int64_t>(w.size())).ok());
  return w;
}

// Dot product with 8 running sums: several times faster than a single-sum loop without
// -ffast-math, which matters for the ~10^10 products of the routing tests.
float dot(const float* a, const float* b, int64_t n) {
  float s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  }
  float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

struct Usage {
  double top55_share = 0.0;      // routing share of the most-used 55% of experts
  std::vector<int> most_used;    // the 10 most-used experts
};

// Routes n_tokens random hidden states (isotropic, RMS 1) through a block's router: softmax,
// top-10, counting selections per expert, as the engine's router does.
Usage measure_routing(const Plan& plan, int layer, int n_tokens, uint32_t seed) {
  const TensorPlan& t = *plan.find("blk." + std::to_string(layer) + ".ffn_gate_inp.weight");
  const int64_t h = t.ne[0], e = t.ne[1];
  const std::vector<float> w = rows_of(plan, t, static_cast<uint64_t>(e));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> u(h), logits(e);
  std::vector<int> counts(e, 0), idx(e);
  for (int tok = 0; tok < n_tokens; ++tok) {
    for (float& x : u) x = normal(rng);
    for (int64_t r = 0; r < e; ++r) logits[r] = dot(u.data(), w.data() + r * h, h);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + 10, idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    for (int j = 0; j < 10; ++j) ++counts[idx[j]];
  }
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return counts[a] > counts[b]; });
  Usage out;
  const auto top = static_cast<size_t>(std::lround(0.55 * e));
  long hits = 0;
  for (size_t i = 0; i < top; ++i) hits += counts[idx[i]];
  out.top55_share = static_cast<double>(hits) / (10.0 * n_tokens);
  out.most_used.assign(idx.begin(), idx.begin() + 10);
  std::printf("routing(skew=%.2f, layer=%d, tokens=%d): top-55%% share %.3f\n", plan.options.routing_skew, layer,
              n_tokens, out.top55_share);
  return out;
}

TEST(SynthRouting, DefaultSkewMatchesTheRealModel) {
  const Plan plan = make(Options{});  // 512 experts, skew 0.88
  EXPECT_NEAR(plan.routing_skew_reached, 0.88, 0.01);
  const Usage l0 = measure_routing(plan, 0, 1200, 1);
  const Usage l5 = measure_routing(plan, 5, 1200, 2);
  EXPECT_NEAR(l0.top55_share, 0.88, 0.03);
  EXPECT_NEAR(l5.top55_share, 0.88, 0.03);
  // Each block has its own popular experts (a per-block permutation), as in a real model.
  std::set<int> common(l0.most_used.begin(), l0.most_used.end());
  int overlap = 0;
  for (int x : l5.most_used) overlap += common.count(x) ? 1 : 0;
  EXPECT_LT(overlap, 5);
}

TEST(SynthRouting, SkewIsConfigurable) {
  Options o;
  o.routing_skew = 0.7;
  const Plan plan = make(o);
  EXPECT_NEAR(measure_routing(plan, 3, 1200, 3).top55_share, 0.7, 0.04);
  o.routing_skew = 0.55;  // uniform: only sampling noise lifts the sorted share above 0.55
  const double uniform = measure_routing(make(o), 3, 1200, 4).top55_share;
  EXPECT_GT(uniform, 0.55);
  EXPECT_LT(uniform, 0.66);  // about 0.63 expected from sorting 1200 tokens of counts
}

// y = W x for random x of RMS 1: the planned std (1/sqrt(fan_in)) makes RMS(y) about 1 for
// every recipe's types, so 48 blocks of them cannot blow activations up.
TEST(SynthRouting, ProjectionsKeepTheRms) {
  const char* names[] = {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_down_exps.weight", "blk.0.attn_qkv.weight",
                         "blk.0.ssm_out.weight", "blk.0.hc_attn_up.weight", "blk.0.ffn_down_shexp.weight",
                         "blk.3.attn_q.weight", "blk.0.ssm_alpha.weight"};
  for (Recipe r : kRecipes) {
    Options o;
    o.recipe = r;
    o.layers = 4;
    o.experts = 10;
    const Plan plan = make(o);
    for (const char* name : names) {
      SCOPED_TRACE(std::string(recipe_name(r)) + " " + name);
      const TensorPlan& t = *plan.find(name);
      const uint64_t n_rows = std::min<uint64_t>(t.n_rows(), 256);
      const std::vector<float> w = rows_of(plan, t, n_rows);
      std::mt19937 rng(7);
      std::normal_distribution<float> normal;
      std::vector<float> x(static_cast<size_t>(t.ne[0]));
      double sum = 0.0;
      for (int rep = 0; rep < 8; ++rep) {
        for (float& v : x) v = normal(rng);
        for (uint64_t row = 0; row < n_rows; ++row) {
          const double y = std::inner_product(x.begin(), x.end(), w.begin() + row * x.size(), 0.0);
          sum += y * y;
        }
      }
      const double rms = std::sqrt(sum / (8.0 * n_rows));
      std::printf("rms(%s, %s, %s): %.3f\n", std::string(recipe_name(r)).c_str(), name,
                  std::string(quant::type_info(t.type)->name).c_str(), rms);
      EXPECT_GT(rms, 0.7);
      EXPECT_LT(rms, 1.4);
    }
  }
}

TEST(SynthRouting, SmallTensorsHaveTheirMeaning) {
  const Plan plan = make(Options{.layers = 4, .experts = 10});
  for (float a : rows_of(plan, *plan.find("blk.0.ssm_a"), 1)) {
    EXPECT_LE(a, -1.0f);
    EXPECT_GE(a, -16.0f);
  }
  for (float dt : rows_of(plan, *plan.find("blk.0.ssm_dt.bias"), 1)) {
    const float softplus = std::log1p(std::exp(dt));
    EXPECT_GE(softplus, 0.9e-3f);
    EXPECT_LE(softplus, 0.11f);
  }
  for (float n : rows_of(plan, *plan.find("blk.0.hc_attn_norm.weight"), 1)) EXPECT_NEAR(n, 1.0f, 0.051f);
}

}  // namespace
}  // namespace strata::synth
