// float_key.h: the unsigned keys the QSA top-k and the MoE router's warp reductions select on must
// order exactly as the floats do, and float_of_key must give back the float's bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "float_key.h"

namespace strata::cuda {
namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

TEST(FloatKey, OrdersLikeTheFloats) {
  using L = std::numeric_limits<float>;
  const std::vector<float> ascending = {-L::infinity(), -L::max(), -2.0f, -1.0f, -L::min(), -L::denorm_min(), 0.0f,
                                        L::denorm_min(), L::min(), 1e-30f, 0.5f, 1.0f, 1.0000001f, L::max(),
                                        L::infinity()};
  for (size_t i = 0; i < ascending.size(); ++i)
    for (size_t j = 0; j < ascending.size(); ++j)
      EXPECT_EQ(float_key(ascending[i]) < float_key(ascending[j]), ascending[i] < ascending[j])
          << ascending[i] << " against " << ascending[j];
  // -0 and +0 compare equal as floats but not as keys (callers keep -0 out): -0 sorts first.
  EXPECT_LT(float_key(-0.0f), float_key(0.0f));
}

TEST(FloatKey, InverseGivesTheBitsBack) {
  using L = std::numeric_limits<float>;
  for (float x : {-L::infinity(), -3.25f, -0.0f, 0.0f, L::denorm_min(), 0.1f, 7.0f, L::max(), L::infinity(),
                  L::quiet_NaN()})
    EXPECT_EQ(bits(float_of_key(float_key(x))), bits(x)) << x;
}

}  // namespace
}  // namespace strata::cuda
