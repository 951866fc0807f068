// The reference's engine activation numerics mode (reference/matmul.h): with it on, a product
// with a q8_1-taking weight type sees each activation row's q8_1 round trip, exactly what the
// CUDA mat-vec sees; with it off, matmul is the plain fp32-activation product; float weights
// are never rounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"
#include "strata/quant/types.h"
#include "strata/reference/matmul.h"
#include "strata/reference/ops.h"

namespace strata::reference {
namespace {

using quant::Type;

constexpr int64_t kCols = 512;  // two Q4_K blocks, sixteen Q8_0 / IQ4_NL blocks
constexpr int64_t kRows = 6;
constexpr int64_t kTok = 3;
constexpr int64_t kLdx = kCols + 32;  // a padded activation stride: rounding must honour ldx

// An in-memory weight of any type: random valid blocks, or random values for F32/F16/BF16.
struct OwnedWeight {
  std::vector<uint8_t> bytes;
  std::vector<float> f32;  // F32 only: Tensor::f32, as bind_weights sets it
  model::Tensor t;
  OwnedWeight(Type type, uint64_t seed) {
    const auto info = *quant::type_info(type);
    const uint64_t row = *quant::row_bytes(type, kCols);
    bytes.resize(row * kRows);
    EXPECT_TRUE(quant::fill_random_blocks(type, seed, bytes.data(), kRows * kCols / info.block_size, 1.0f).ok());
    t.type = type;
    t.ne = {kCols, kRows, 1, 1};
    t.data = bytes.data();
    t.row_bytes = row;
    if (type == Type::F32) t.f32 = reinterpret_cast<const float*>(bytes.data());
  }
  std::vector<float> row(int64_t r) const {
    std::vector<float> out(kCols);
    EXPECT_TRUE(quant::dequantize_row(t.type, t.row(r), out.data(), kCols).ok());
    return out;
  }
};

// kTok rows of activations at stride kLdx. Row 0's first block has amax 127 (d = 1), so its
// halves are exact q8_1 ties (round away from zero); the rest is N(0, 1) plus an outlier per
// row, so most values land between codes.
std::vector<float> activations() {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(kTok * kLdx, NAN);  // the padding must never be read
  for (int64_t t = 0; t < kTok; ++t)
    for (int64_t c = 0; c < kCols; ++c) x[t * kLdx + c] = n(rng);
  for (int64_t t = 0; t < kTok; ++t) x[t * kLdx + 37 + t] = 9.0f;
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  return x;
}

// One row through q8_1 and back, as the engine's quantizer and the reference dequantizer do it.
std::vector<float> q8_1_round_trip(const float* x) {
  std::vector<uint8_t> q(*quant::row_bytes(Type::Q8_1, kCols));
  quant::quantize_row_q8_1(x, q.data(), kCols);
  std::vector<float> out(kCols);
  EXPECT_TRUE(quant::dequantize_row(Type::Q8_1, q.data(), out.data(), kCols).ok());
  return out;
}

std::vector<float> run_matmul(const model::Tensor& w, const std::vector<float>& x) {
  ThreadPool pool(2);
  std::vector<float> y(kTok * kRows, NAN);
  matmul({&w, 0, kRows}, x.data(), kLdx, kTok, y.data(), kRows, pool);
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(EngineNumerics, OffByDefaultAndScoped) {
  EXPECT_FALSE(engine_activation_numerics());
  {
    ScopedEngineActivationNumerics on(true);
    EXPECT_TRUE(engine_activation_numerics());
    {
      ScopedEngineActivationNumerics off(false);
      EXPECT_FALSE(engine_activation_numerics());
    }
    EXPECT_TRUE(engine_activation_numerics());
  }
  EXPECT_FALSE(engine_activation_numerics());
}

TEST(EngineNumerics, RoundTripRowExercisesRounding) {
  const std::vector<float> x = activations();
  const std::vector<float> r = q8_1_round_trip(x.data());
  EXPECT_EQ(r[0], 127.0f);
  EXPECT_EQ(r[1], 3.0f);   // 2.5 -> code 3: ties away from zero
  EXPECT_EQ(r[2], -3.0f);
  EXPECT_EQ(r[3], 1.0f);
  int changed = 0;
  for (int64_t c = 0; c < kCols; ++c) changed += r[c] != x[c];
  EXPECT_GT(changed, kCols / 2);
}

class QuantizedWeight : public ::testing::TestWithParam<Type> {};

// Mode on: y[t, r] is the double dot of the dequantized weight row with the q8_1 round trip of
// x's row t (only the output's float rounding and the summation order remain).
TEST_P(QuantizedWeight, ModeOnSeesTheQ8_1RoundTrip) {
  ASSERT_TRUE(quant::takes_q8_1_activations(GetParam()));
  const OwnedWeight w(GetParam(), 11);
  const std::vector<float> x = activations();
  std::vector<float> y;
  {
    ScopedEngineActivationNumerics on(true);
    y = run_matmul(w.t, x);
  }
  double worst_gap_to_fp32 = 0.0;
  for (int64_t t = 0; t < kTok; ++t) {
    const std::vector<float> xr = q8_1_round_trip(x.data() + t * kLdx);
    for (int64_t r = 0; r < kRows; ++r) {
      const std::vector<float> wr = w.row(r);
      double want = 0.0, fp32 = 0.0, mag = 0.0;
      for (int64_t c = 0; c < kCols; ++c) {
        want += static_cast<double>(wr[c]) * xr[c];
        fp32 += static_cast<double>(wr[c]) * x[t * kLdx + c];
        mag += std::abs(static_cast<double>(wr[c]) * xr[c]);
      }
      const double got = y[t * kRows + r];
      EXPECT_NEAR(got, want, 1e-6 * mag) << "t=" << t << " r=" << r;
      worst_gap_to_fp32 = std::max(worst_gap_to_fp32, std::abs(got - fp32) / mag);
    }
  }
  // The rounding is visible: far above the tolerance above.
  EXPECT_GT(worst_gap_to_fp32, 1e-4);
}

// Mode off: exactly the products of before (dequantized row dotted with x by ops.h's dot).
TEST_P(QuantizedWeight, ModeOffIsBitIdentical) {
  const OwnedWeight w(GetParam(), 12);
  const std::vector<float> x = activations();
  ASSERT_FALSE(engine_activation_numerics());
  const std::vector<float> y = run_matmul(w.t, x);
  std::vector<float> want(kTok * kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    const std::vector<float> wr = w.row(r);
    for (int64_t t = 0; t < kTok; ++t) want[t * kRows + r] = dot(wr.data(), x.data() + t * kLdx, kCols);
  }
  EXPECT_TRUE(same_bits(y, want));
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedWeight, ::testing::Values(Type::Q8_0, Type::Q4_K, Type::IQ4_NL),
                         [](const auto& info) { return std::string(quant::type_info(info.param)->name); });

class FloatWeight : public ::testing::TestWithParam<Type> {};

// F32/F16/BF16 weights take f32 activations in the engine: the mode changes nothing.
TEST_P(FloatWeight, NeverRounded) {
  EXPECT_FALSE(quant::takes_q8_1_activations(GetParam()));
  const OwnedWeight w(GetParam(), 13);
  const std::vector<float> x = activations();
  const std::vector<float> off = run_matmul(w.t, x);
  std::vector<float> on;
  {
    ScopedEngineActivationNumerics guard(true);
    on = run_matmul(w.t, x);
  }
  EXPECT_TRUE(same_bits(on, off));
  // And the whole-tensor overload agrees (packed x, one token).
  const std::vector<float> x0(x.begin(), x.begin() + kCols);
  ScopedEngineActivationNumerics guard(true);
  ThreadPool pool(1);
  const std::vector<float> y0 = matmul(w.t, x0, 1, pool);
  EXPECT_TRUE(same_bits(y0, std::vector<float>(off.begin(), off.begin() + kRows)));
}

INSTANTIATE_TEST_SUITE_P(Types, FloatWeight, ::testing::Values(Type::F32, Type::F16, Type::BF16),
                         [](const auto& info) { return std::string(quant::type_info(info.param)->name); });

// The q8_1 set: the engine's kernel types (mmvq.cu checks the same list at compile time), each
// with whole 32-value blocks per row; float types and kernel-less types are not in it.
TEST(EngineNumerics, Q8_1SetIsTheKernelSet) {
  for (Type t : {Type::Q4_0, Type::Q5_0, Type::Q5_1, Type::Q8_0, Type::IQ4_NL, Type::Q2_0, Type::Q4_K, Type::Q5_K,
                 Type::Q6_K, Type::IQ2_XXS, Type::IQ2_XS, Type::IQ2_S, Type::IQ3_XXS, Type::IQ3_S, Type::IQ1_M,
                 Type::IQ4_XS})
    EXPECT_TRUE(quant::takes_q8_1_activations(t)) << quant::type_info(t)->name;
  for (Type t : {Type::F32, Type::F16, Type::BF16, Type::Q4_1, Type::Q8_1, Type::Q2_K, Type::Q3_K, Type::Q8_K,
                 Type::TQ1_0, Type::MXFP4, Type::NVFP4, Type::Q1_0})
    EXPECT_FALSE(quant::takes_q8_1_activations(t)) << quant::type_info(t)->name;
  EXPECT_EQ(quant::count_q8_1_activation_types(), 16);
  for (uint32_t id = 0; id < quant::kTypeCount; ++id) {
    const Type t = static_cast<Type>(id);
    if (quant::takes_q8_1_activations(t)) {
      EXPECT_EQ(quant::type_info(t)->block_size % 32, 0u) << id;
    }
  }
}

}  // namespace
}  // namespace strata::reference
