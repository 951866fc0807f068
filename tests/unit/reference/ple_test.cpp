// PLE: the hash constants against spec/model.md Appendix A, the EOS window rule, the hash.
#include <gtest/gtest.h>

#include "strata/reference/ple.h"

namespace strata::reference {
namespace {

TEST(Ple, MultipliersOfTheReleasedModel) {
  EXPECT_EQ(ple_multipliers(248320, 3, 0, 1234),
            (std::vector<uint64_t>{23703573157769ull, 20109073645365ull, 8052911324071ull}));
}

TEST(Ple, ModuliAndOffsetsOfTheReleasedModel) {
  const std::vector<uint64_t> sizes = ple_head_sizes(20000000, 16, 0);
  const std::vector<uint64_t> want = {20000003, 20000023, 20000033, 20000047, 20000059, 20000063, 20000069, 20000077,
                                      20000081, 20000093, 20000107, 20000147, 20000153, 20000159, 20000161, 20000171};
  EXPECT_EQ(sizes, want);
  const std::vector<uint64_t> off = ple_head_offsets(sizes);
  EXPECT_EQ(off[1], 20000003u);
  EXPECT_EQ(off[8], 160000374u);
  EXPECT_EQ(off[15], 300001275u);
  EXPECT_EQ(off[15] + sizes[15], 320001446u);  // padded to 320001536 rows in the table
}

model::PleConfig released_ple() {
  model::PleConfig p;
  p.ngram_size = 3;
  p.heads_per_ngram = 8;
  p.n_heads = 16;
  p.row_dim = 160;
  p.conv_kernel = 4;
  p.eos_token_id = 248044;
  p.multipliers = ple_multipliers(248320, 3, 0, 1234);
  p.head_sizes = ple_head_sizes(20000000, 16, 0);
  p.head_offsets = ple_head_offsets(p.head_sizes);
  return p;
}

// c[0..2] for each token from a fresh context ([EOS, EOS]).
std::vector<std::vector<int64_t>> contexts(const model::PleConfig& p, std::vector<int32_t>& ctx,
                                           const std::vector<int32_t>& tokens) {
  const std::vector<int64_t> flat = ple_contexts(p, ctx, tokens);
  std::vector<std::vector<int64_t>> out;
  for (size_t t = 0; t < tokens.size(); ++t) out.push_back({flat[3 * t], flat[3 * t + 1], flat[3 * t + 2]});
  return out;
}

TEST(Ple, EosRule) {
  const model::PleConfig p = released_ple();
  const int64_t E = 248044;
  std::vector<int32_t> ctx = {static_cast<int32_t>(E), static_cast<int32_t>(E)};
  // 10 11 EOS 12 13 EOS EOS 14
  const auto c = contexts(p, ctx, {10, 11, int32_t(E), 12, 13, int32_t(E), int32_t(E), 14});
  EXPECT_EQ(c[0], (std::vector<int64_t>{10, E, E}));     // missing history reads as EOS
  EXPECT_EQ(c[1], (std::vector<int64_t>{11, 10, E}));
  EXPECT_EQ(c[2], (std::vector<int64_t>{E, 11, 10}));    // an EOS does not cut its own context
  EXPECT_EQ(c[3], (std::vector<int64_t>{12, E, E}));     // the earlier EOS cuts the window
  EXPECT_EQ(c[4], (std::vector<int64_t>{13, 12, E}));
  EXPECT_EQ(c[5], (std::vector<int64_t>{E, 13, 12}));
  EXPECT_EQ(c[6], (std::vector<int64_t>{E, E, E}));
  EXPECT_EQ(c[7], (std::vector<int64_t>{14, E, E}));
  EXPECT_EQ(ctx, (std::vector<int32_t>{int32_t(E), 14}));  // the cache keeps the last 2 raw ids
}

TEST(Ple, ContextsStreamLikeOnePass) {
  const model::PleConfig p = released_ple();
  const std::vector<int32_t> tokens = {7, 248044, 9, 9, 248044, 3, 4, 5};
  std::vector<int32_t> a = {248044, 248044}, b = a;
  const std::vector<int64_t> one = ple_contexts(p, a, tokens);
  std::vector<int64_t> parts;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<int64_t> c = ple_contexts(p, b, std::span(tokens).subspan(i, 1));
    parts.insert(parts.end(), c.begin(), c.end());
  }
  EXPECT_EQ(one, parts);
}

TEST(Ple, RowsHash) {
  const model::PleConfig p = released_ple();
  const int64_t ctx[3] = {1000, 2000, 3000};
  const std::vector<uint64_t> rows = ple_rows(p, ctx);
  const uint64_t h2 = (1000ull * p.multipliers[0]) ^ (2000ull * p.multipliers[1]);
  const uint64_t h3 = h2 ^ (3000ull * p.multipliers[2]);
  for (int h = 0; h < 8; ++h) EXPECT_EQ(rows[h], h2 % p.head_sizes[h] + p.head_offsets[h]) << h;
  for (int h = 8; h < 16; ++h) EXPECT_EQ(rows[h], h3 % p.head_sizes[h] + p.head_offsets[h]) << h;
  for (int h = 0; h < 16; ++h) EXPECT_LT(rows[h], 320001446u);
}

// An id beyond a tiny vocab can overflow int64 in transformers' hash; torch.remainder then
// takes the floor modulus of the negative value, which differs from the unsigned one.
TEST(Ple, NegativeHashUsesTheFloorModulus) {
  model::PleConfig p;
  p.ngram_size = 2;
  p.heads_per_ngram = 1;
  p.n_heads = 1;
  p.multipliers = {1ull << 62, 1};
  p.head_sizes = {1000003};
  p.head_offsets = {0};
  const int64_t ctx[2] = {3, 0};  // 3 * 2^62 wraps to -2^62 in int64
  const int64_t hash = static_cast<int64_t>(3ull << 62);
  ASSERT_LT(hash, 0);
  const int64_t want = ((hash % 1000003) + 1000003) % 1000003;
  EXPECT_EQ(ple_rows(p, ctx)[0], static_cast<uint64_t>(want));
  EXPECT_NE(ple_rows(p, ctx)[0], (3ull << 62) % 1000003);
}

}  // namespace
}  // namespace strata::reference
