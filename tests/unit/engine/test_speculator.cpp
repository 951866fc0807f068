// Drafts: the prompt-lookup rule (n-gram order, most recent occurrence, truncation at the
// context's end) and the per-window policy and MTP chain, on a scripted backend.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "strata/engine/speculator.h"

namespace strata::engine {
namespace {

using Ids = std::vector<int32_t>;

TEST(Lookup, LongestNgramFirst) {
  const Ids ctx = {1, 2, 3, 4, 5, 9, 2, 3, 6, 1, 2, 3};
  // 3-gram (1,2,3) occurs at 0 -> what followed it; the 2-gram (2,3) at 6 is more recent but shorter.
  const LookupMatch m = lookup_draft(ctx, 3);
  EXPECT_EQ(m.ngram, 3);
  EXPECT_EQ(m.tokens, (Ids{4, 5, 9}));
}

TEST(Lookup, MostRecentOccurrence) {
  const Ids ctx = {7, 8, 1, 9, 7, 8, 2, 5, 0, 7, 8};
  const LookupMatch m = lookup_draft(ctx, 2);
  EXPECT_EQ(m.ngram, 2);
  EXPECT_EQ(m.tokens, (Ids{2, 5}));
}

TEST(Lookup, FallsBackToShorterNgrams) {
  const Ids ctx = {4, 6, 0, 5, 8};
  LookupMatch m = lookup_draft(Ids{4, 6, 0, 5, 6}, 4);
  EXPECT_EQ(m.ngram, 1);
  EXPECT_EQ(m.tokens, (Ids{0, 5, 6}));  // runs to the context's end: may repeat the suffix
  m = lookup_draft(ctx, 4);
  EXPECT_EQ(m.ngram, 0);
  EXPECT_TRUE(m.tokens.empty());
}

TEST(Lookup, TruncatedAtContextEndAndByMax) {
  const Ids ctx = {1, 2, 1, 2};
  LookupMatch m = lookup_draft(ctx, 5);
  EXPECT_EQ(m.ngram, 2);
  EXPECT_EQ(m.tokens, (Ids{1, 2}));
  m = lookup_draft(ctx, 1);
  EXPECT_EQ(m.tokens, (Ids{1}));
  EXPECT_EQ(lookup_draft(ctx, 0).ngram, 0);
  EXPECT_EQ(lookup_draft(Ids{3}, 4).ngram, 0);
  // A run of one token: the newest 3-gram (5,5,5) first occurs ending one before the end.
  m = lookup_draft(Ids{5, 5, 5, 5}, 3);
  EXPECT_EQ(m.ngram, 3);
  EXPECT_EQ(m.tokens, (Ids{5}));
}

// A backend whose MTP head always drafts `chain[i]` at step i with head probability probs[i].
class ScriptedBackend final : public Backend {
 public:
  ScriptedBackend(bool mtp, Ids chain, std::vector<double> probs)
      : mtp_(mtp), chain_(std::move(chain)), probs_(std::move(probs)) {}
  std::string name() const override { return "scripted"; }
  int64_t n_vocab() const override { return 16; }
  int max_window() const override { return 8; }
  int64_t n_past() const override { return 0; }
  Result<BackendWindow> prefill(std::span<const int32_t>, LogitRows) override { return BackendWindow{}; }
  Result<BackendWindow> forward(std::span<const int32_t>, LogitRows) override { return BackendWindow{}; }
  Status commit(int) override { return Status::ok_status(); }
  bool has_mtp() const override { return mtp_; }
  Result<std::vector<float>> mtp_sync() override { return std::vector<float>{}; }
  Result<std::vector<float>> mtp_start(int32_t) override {
    step_ = 0;
    ++starts;
    return row();
  }
  Result<std::vector<float>> mtp_continue(int32_t) override {
    ++step_;
    return row();
  }
  int starts = 0;

 private:
  // Logits with softmax probability probs[step] on chain[step], the rest spread evenly.
  std::vector<float> row() const {
    const double p = probs_[step_], rest = (1.0 - p) / 15.0;
    std::vector<float> l(16, static_cast<float>(std::log(rest)));
    l[chain_[step_]] = static_cast<float>(std::log(p));
    return l;
  }
  bool mtp_;
  Ids chain_;
  std::vector<double> probs_;
  size_t step_ = 0;
};

Speculator make(SpecConfig spec) {
  auto s = Speculator::create(spec, {}, 1);
  EXPECT_TRUE(s.ok()) << s.error();
  return std::move(*s);
}

TEST(Speculator, RejectsBadConfig) {
  EXPECT_FALSE(Speculator::create({.max_drafts = 8}, {}, 0).ok());
  EXPECT_FALSE(Speculator::create({.max_drafts = -1}, {}, 0).ok());
  EXPECT_FALSE(Speculator::create({.max_drafts = 2, .min_p = 1.5f}, {}, 0).ok());
}

TEST(Speculator, AutoTakesLookupOnALongMatchElseMtp) {
  ScriptedBackend be(true, {9, 10, 11, 12}, {0.9, 0.9, 0.9, 0.9});
  Speculator s = make({.max_drafts = 3, .source = DraftSource::Auto});
  auto d = s.propose(be, Ids{1, 2, 3, 4, 5, 1, 2, 3}, 3);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->source, DraftSource::Lookup);
  EXPECT_EQ(d->tokens, (Ids{4, 5, 1}));
  EXPECT_EQ(be.starts, 0);
  d = s.propose(be, Ids{1, 2, 3, 4, 5, 0, 2, 3}, 3);  // only a 2-gram recurs: MTP
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->source, DraftSource::Mtp);
  EXPECT_EQ(d->tokens, (Ids{9, 10, 11}));
  EXPECT_TRUE(d->mtp_started);
}

TEST(Speculator, AutoWithoutMtpTakesAnyLookupMatch) {
  ScriptedBackend be(false, {9}, {0.9});
  Speculator s = make({.max_drafts = 2, .source = DraftSource::Auto});
  auto d = s.propose(be, Ids{4, 6, 0, 5, 6}, 2);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->source, DraftSource::Lookup);
  EXPECT_EQ(d->tokens, (Ids{0, 5}));
}

TEST(Speculator, MtpChainStopsBelowMinP) {
  ScriptedBackend be(true, {9, 10, 11, 12}, {0.9, 0.6, 0.2, 0.9});
  Speculator s = make({.max_drafts = 4, .min_p = 0.5f, .source = DraftSource::Mtp});
  auto d = s.propose(be, Ids{1, 2}, 4);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tokens, (Ids{9, 10}));
}

TEST(Speculator, CapsAtRoomAndConfig) {
  ScriptedBackend be(true, {9, 10, 11, 12}, {0.9, 0.9, 0.9, 0.9});
  Speculator s = make({.max_drafts = 2, .source = DraftSource::Mtp});
  auto d = s.propose(be, Ids{1}, 4);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tokens.size(), 2u);
  d = s.propose(be, Ids{1}, 0);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->tokens.empty());
  Speculator lookup = make({.max_drafts = 2, .source = DraftSource::Mtp});
  ScriptedBackend none(false, {9}, {0.9});
  EXPECT_FALSE(lookup.propose(none, Ids{1, 2}, 2).ok());  // mtp asked for, no head
}

TEST(Speculator, SampledDraftsCarryTheirDistribution) {
  ScriptedBackend be(true, {9, 10}, {0.7, 0.7});
  auto s = Speculator::create({.max_drafts = 2, .source = DraftSource::Mtp}, {.temperature = 1.0f}, 3);
  ASSERT_TRUE(s.ok());
  auto d = s->propose(be, Ids{1}, 2);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->q.size(), d->tokens.size());
  for (size_t i = 0; i < d->q.size(); ++i) EXPECT_GT(prob_of(d->q[i], d->tokens[i]), 0.0);
  auto l = Speculator::create({.max_drafts = 2, .source = DraftSource::Lookup}, {.temperature = 1.0f}, 3);
  ASSERT_TRUE(l.ok());
  d = l->propose(be, Ids{1, 2, 1}, 2);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->tokens, (Ids{2, 1}));
  ASSERT_EQ(d->q[0].size(), 1u);  // lookup: the point mass on the draft
  EXPECT_EQ(d->q[0][0].id, 2);
  EXPECT_EQ(d->q[0][0].prob, 1.0);
}

}  // namespace
}  // namespace strata::engine
