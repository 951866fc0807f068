// End-to-end properties of the reference forward on tiny random models written in the test:
// prefill + decode == one pass (bitwise with the recurrent GDN everywhere, within fp32
// rounding with the chunked prefill), MTP incremental == batched, fused == split experts,
// QSA actually sparse past the budget, quantized weights running.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "strata/reference/forward.h"
#include "tiny_model.h"

namespace strata {
namespace {

using reference::ForwardOptions;
using reference::GdnPath;
using reference::Model;
using reference::SequenceState;

std::unique_ptr<Model> open_tiny(const testing::TinySpec& spec, const std::string& name) {
  const std::string path = testing::temp_path(name);
  const Status s = testing::write_tiny_model(spec, path);
  EXPECT_TRUE(s.ok()) << s.message();
  auto m = Model::open(path, 2);
  std::remove(path.c_str());  // the mapping stays valid after unlink
  EXPECT_TRUE(m.ok()) << m.error();
  return m.ok() ? std::move(m.value()) : nullptr;
}

std::vector<int32_t> prompt_tokens(int n, uint32_t vocab, int32_t eos) {
  std::vector<int32_t> t;
  uint64_t x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.push_back(static_cast<int32_t>((x >> 33) % vocab));
  }
  // EOS inside the prompt exercises the PLE window cut (twice in a row, and at the end of a chunk).
  t[5] = eos;
  t[6] = eos;
  if (n > 64) t[63] = eos;
  return t;
}

// Logits of one pass over all tokens, and of a prefill of `split` tokens then one at a time.
struct TwoRuns {
  std::vector<float> one_pass, incremental;
};
TwoRuns run_both(const Model& m, const std::vector<int32_t>& tokens, size_t split, GdnPath path) {
  ForwardOptions fo;
  fo.gdn = path;
  TwoRuns r;
  SequenceState a = SequenceState::create(m.config());
  auto out = reference::forward(m, a, tokens, fo);
  EXPECT_TRUE(out.ok()) << out.error();
  r.one_pass = out->logits;
  SequenceState b = SequenceState::create(m.config());
  out = reference::forward(m, b, std::span(tokens).first(split), fo);
  EXPECT_TRUE(out.ok()) << out.error();
  r.incremental = out->logits;
  for (size_t i = split; i < tokens.size(); ++i) {
    out = reference::forward(m, b, std::span(tokens).subspan(i, 1), fo);
    EXPECT_TRUE(out.ok()) << out.error();
    r.incremental.insert(r.incremental.end(), out->logits.begin(), out->logits.end());
  }
  return r;
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(Forward, PrefillDecodeBitwiseWithRecurrentGdn) {
  testing::TinySpec spec;
  spec.n_trunk = 8;
  auto m = open_tiny(spec, "fwd_rec.gguf");
  ASSERT_TRUE(m);
  const auto tokens = prompt_tokens(40, spec.vocab, spec.eos);
  const TwoRuns r = run_both(*m, tokens, 17, GdnPath::Recurrent);
  ASSERT_EQ(r.one_pass.size(), tokens.size() * spec.vocab);
  EXPECT_EQ(r.one_pass, r.incremental);
  for (float x : r.one_pass) ASSERT_TRUE(std::isfinite(x));
}

// The documented tolerance: prefill (chunked GDN) + decode (recurrent GDN) against one
// chunked pass, max |diff| <= 1e-4 * max |logit| (observed ~1e-6 relative).
TEST(Forward, PrefillDecodeWithinToleranceWithChunkedPrefill) {
  testing::TinySpec spec;
  spec.n_trunk = 8;
  auto m = open_tiny(spec, "fwd_auto.gguf");
  ASSERT_TRUE(m);
  const auto tokens = prompt_tokens(150, spec.vocab, spec.eos);  // > 2 GDN chunks of 64
  const TwoRuns r = run_both(*m, tokens, 70, GdnPath::Auto);
  const float scale = max_abs(r.one_pass), diff = max_diff(r.one_pass, r.incremental);
  std::printf("prefill+decode vs one pass: max|diff| %.3g, max|logit| %.3g\n", diff, scale);
  EXPECT_LE(diff, 1e-4f * scale);
}

TEST(Forward, ChunkedOnePassMatchesRecurrentOnePass) {
  testing::TinySpec spec;
  auto m = open_tiny(spec, "fwd_chunk.gguf");
  ASSERT_TRUE(m);
  const auto tokens = prompt_tokens(150, spec.vocab, spec.eos);
  ForwardOptions rec, chunk;
  rec.gdn = GdnPath::Recurrent;
  chunk.gdn = GdnPath::Chunked;
  SequenceState a = SequenceState::create(m->config()), b = SequenceState::create(m->config());
  auto ra = reference::forward(*m, a, tokens, rec);
  auto rb = reference::forward(*m, b, tokens, chunk);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_LE(max_diff(ra->logits, rb->logits), 1e-4f * max_abs(ra->logits));
  EXPECT_NE(ra->logits, rb->logits);  // two different computations, not one path twice
}

TEST(Forward, MtpIncrementalMatchesBatched) {
  testing::TinySpec spec;
  auto m = open_tiny(spec, "fwd_mtp.gguf");
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->config().plan.has_mtp());
  const auto tokens = prompt_tokens(30, spec.vocab, spec.eos);
  ForwardOptions fo;
  fo.gdn = GdnPath::Recurrent;
  SequenceState a = SequenceState::create(m->config());
  auto trunk = reference::forward(*m, a, tokens, fo);
  ASSERT_TRUE(trunk.ok());
  const int64_t w = m->config().n_wide();
  const size_t n = tokens.size() - 1;
  auto batched = reference::forward_mtp(*m, a, std::span(trunk->wide).first(n * w), std::span(tokens).subspan(1), fo);
  ASSERT_TRUE(batched.ok()) << batched.error();
  SequenceState b = SequenceState::create(m->config());
  std::vector<float> inc;
  for (size_t i = 0; i < n; ++i) {
    auto t = reference::forward(*m, b, std::span(tokens).subspan(i, 1), fo);
    ASSERT_TRUE(t.ok());
    auto d = reference::forward_mtp(*m, b, t->wide, std::span(tokens).subspan(i + 1, 1), fo);
    ASSERT_TRUE(d.ok());
    inc.insert(inc.end(), d->logits.begin(), d->logits.end());
  }
  EXPECT_EQ(batched->logits, inc);
  EXPECT_EQ(a.mtp.n, static_cast<int64_t>(n));
}

TEST(Forward, QsaIsSparsePastTheBudgetAndDenseBelow) {
  testing::TinySpec sparse, dense;
  dense.top_k = 4096;  // every block always selected
  auto ms = open_tiny(sparse, "fwd_qsa_s.gguf");
  auto md = open_tiny(dense, "fwd_qsa_d.gguf");
  ASSERT_TRUE(ms && md);
  const auto tokens = prompt_tokens(48, sparse.vocab, sparse.eos);
  SequenceState a = SequenceState::create(ms->config()), b = SequenceState::create(md->config());
  auto ra = reference::forward(*ms, a, tokens);
  auto rb = reference::forward(*md, b, tokens);
  ASSERT_TRUE(ra.ok() && rb.ok());
  // top_k 8 / ratio 4 = 2 blocks: dense while n/4 <= 2, i.e. up to 2*4 + 3 = 11 visible
  // tokens (positions 0..10); position 11 sees 3 complete blocks and drops one.
  const size_t v = sparse.vocab;
  const size_t dense_rows = 11;
  EXPECT_TRUE(std::equal(ra->logits.begin(), ra->logits.begin() + dense_rows * v, rb->logits.begin()));
  EXPECT_FALSE(std::equal(ra->logits.begin() + dense_rows * v, ra->logits.end(), rb->logits.begin() + dense_rows * v));
}

TEST(Forward, QuantizedWeightsRunAndStayConsistent) {
  testing::TinySpec spec;
  spec.quantized = true;
  auto m = open_tiny(spec, "fwd_q8.gguf");
  ASSERT_TRUE(m);
  const auto tokens = prompt_tokens(20, spec.vocab, spec.eos);
  const TwoRuns r = run_both(*m, tokens, 9, GdnPath::Recurrent);
  EXPECT_EQ(r.one_pass, r.incremental);
  for (float x : r.one_pass) ASSERT_TRUE(std::isfinite(x));
}

TEST(Forward, RejectsOutOfRangeTokens) {
  testing::TinySpec spec;
  auto m = open_tiny(spec, "fwd_bad.gguf");
  ASSERT_TRUE(m);
  SequenceState s = SequenceState::create(m->config());
  const std::vector<int32_t> bad = {1, static_cast<int32_t>(spec.vocab)};
  auto out = reference::forward(*m, s, bad);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().find("out of range"), std::string::npos) << out.error();
}

}  // namespace
}  // namespace strata
