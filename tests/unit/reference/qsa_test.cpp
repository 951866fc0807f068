// QSA block keys, scores and selection (spec/model.md §7.2).
#include <gtest/gtest.h>

#include <cmath>

#include "strata/reference/qsa.h"

namespace strata::reference {
namespace {

TEST(Qsa, BlockKeyPoolsRawKeysThenNormsThenRopesAtTheFirstPosition) {
  const int64_t d = 8;
  std::vector<float> raw(4 * d);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = std::sin(0.37f * i);
  std::vector<float> w(d);
  for (int i = 0; i < d; ++i) w[i] = 1.0f + 0.1f * i;
  const Rope rope{4, 10000.0f, {11, 11, 10}};
  std::vector<float> got(d);
  qsa_block_key(raw.data(), 4, d, w, 1e-6f, rope, 12, got.data());

  std::vector<float> want(d);
  for (int a = 0; a < d; ++a) want[a] = (raw[a] + raw[d + a] + raw[2 * d + a] + raw[3 * d + a]) / 4.0f;
  rms_norm(want, w, 1e-6f, want);
  rope_apply(want, rope_angles(rope, text_pos(12)));
  EXPECT_EQ(got, want);
}

TEST(Qsa, ScoresSumReluPerHeadOverSqrtD) {
  const std::vector<float> q = {1, 0, -1, 0};      // 2 heads of d = 2
  const std::vector<float> keys = {2, 1, -3, 5};   // 2 blocks
  const std::vector<float> s = qsa_block_scores(q.data(), 2, 2, keys.data(), 2);
  // block 0: head0 2, head1 -2 -> relu 2; block 1: head0 -3, head1 3 -> 3.
  EXPECT_FLOAT_EQ(s[0], 2.0f / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(s[1], 3.0f / std::sqrt(2.0f));
}

TEST(Qsa, DenseAtOrBelowTheBudget) {
  // top 2 blocks of 4: dense up to 2*4 + 3 = 11 visible tokens.
  for (int64_t n : {1, 4, 8, 11}) {
    const std::vector<int32_t> sel = qsa_select(n, 4, 2, {});
    ASSERT_EQ(static_cast<int64_t>(sel.size()), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(sel[i], i);
  }
}

TEST(Qsa, SparseKeepsTopBlocksAndTheTail) {
  const std::vector<float> scores = {0.1f, 0.9f, 0.3f, 0.8f};  // 4 complete blocks, 18 visible
  const std::vector<int32_t> sel = qsa_select(18, 4, 2, scores);
  EXPECT_EQ(sel, (std::vector<int32_t>{4, 5, 6, 7, 12, 13, 14, 15, 16, 17}));
}

TEST(Qsa, OwnBlockNotForcedWhenComplete) {
  // 12 visible: 3 complete blocks, no tail; the newest block can lose.
  const std::vector<float> scores = {0.5f, 0.7f, 0.1f};
  EXPECT_EQ(qsa_select(12, 4, 2, scores), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Qsa, TiesKeepTheLowerBlockIndex) {
  const std::vector<float> scores = {0.0f, 0.4f, 0.0f, 0.0f, 0.0f};  // relu zeros tie
  EXPECT_EQ(qsa_select(21, 4, 3, scores),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 20}));
}

}  // namespace
}  // namespace strata::reference
