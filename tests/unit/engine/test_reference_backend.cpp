// The reference backend on a tiny random model (tests/unit/reference/tiny_model.h: GDN, QSA
// attention with sparse selection after 8 tokens, PLE, MTP):
//   - rollback: after a window of T rows and commit(n), every state equals, bit for bit, the
//     state after those n tokens fed one at a time, and the kept rows' logits are the same bits;
//   - the MTP cache after draft chains equals the cache of trunk-fed slots alone;
//   - generation: greedy ids and logits with --spec 1 .. 7 (mtp, lookup, auto) equal --spec 0;
//     drafts of a random model are rarely right, so a second test drafts from the known greedy
//     continuation (right at most positions, wrong at some) to run full and partial acceptance.
#include <cstdio>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "../reference/tiny_model.h"
#include "strata/engine/generate.h"
#include "strata/engine/reference_backend.h"

namespace strata::engine {
namespace {

using Ids = std::vector<int32_t>;

class ReferenceBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = strata::testing::temp_path("engine_backend.gguf");
    const Status s = strata::testing::write_tiny_model(spec_, path);
    ASSERT_TRUE(s.ok()) << s.message();
    auto m = reference::Model::open(path, 2);
    std::remove(path.c_str());  // the mapping stays valid after unlink
    ASSERT_TRUE(m.ok()) << m.error();
    model_ = std::move(*m).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }

  static Ids tokens(int n, uint64_t seed) {
    Ids t;
    for (int i = 0; i < n; ++i) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      t.push_back(static_cast<int32_t>((seed >> 33) % spec_.vocab));
    }
    return t;
  }

  static std::unique_ptr<ReferenceBackend> backend(bool mtp) {
    BackendOptions o;
    o.mtp = mtp;
    return std::make_unique<ReferenceBackend>(*model_, o);
  }

  static inline strata::testing::TinySpec spec_;
  static inline reference::Model* model_ = nullptr;
};

void expect_same_attn(const reference::AttnCache& a, const reference::AttnCache& b, const char* what) {
  EXPECT_EQ(a.n, b.n) << what;
  EXPECT_EQ(a.k, b.k) << what;
  EXPECT_EQ(a.v, b.v) << what;
  EXPECT_EQ(a.index_k, b.index_k) << what;
  EXPECT_EQ(a.block_k, b.block_k) << what;
}

void expect_same_state(const reference::SequenceState& a, const reference::SequenceState& b) {
  EXPECT_EQ(a.n_past, b.n_past);
  ASSERT_EQ(a.gdn.size(), b.gdn.size());
  for (size_t i = 0; i < a.gdn.size(); ++i) {
    EXPECT_EQ(a.gdn[i].conv, b.gdn[i].conv) << "gdn conv " << i;
    EXPECT_EQ(a.gdn[i].ssm, b.gdn[i].ssm) << "gdn ssm " << i;
    EXPECT_EQ(a.gdn[i].has_state, b.gdn[i].has_state) << "gdn " << i;
  }
  ASSERT_EQ(a.attn.size(), b.attn.size());
  for (size_t i = 0; i < a.attn.size(); ++i) expect_same_attn(a.attn[i], b.attn[i], "attn");
  EXPECT_EQ(a.ple.context, b.ple.context);
  EXPECT_EQ(a.ple.conv, b.ple.conv);
  expect_same_attn(a.mtp, b.mtp, "mtp");
}

TEST_F(ReferenceBackendTest, CommitEqualsTheKeptRowsAlone) {
  ASSERT_NE(model_, nullptr);
  const Ids prompt = tokens(6, 11);
  const int64_t vocab = model_->config().n_vocab;
  // Windows that cross the dense-to-sparse QSA switch and index-block boundaries (ratio 4).
  for (int t = 1; t <= 8; ++t) {
    for (int n = 1; n <= t; ++n) {
      auto a = backend(false), b = backend(false);
      ASSERT_TRUE(a->prefill(prompt, LogitRows::None).ok());
      ASSERT_TRUE(b->prefill(prompt, LogitRows::None).ok());
      const Ids window = tokens(t, 100 + t);
      auto w = a->forward(window, LogitRows::All);
      ASSERT_TRUE(w.ok()) << w.error();
      ASSERT_TRUE(a->commit(n).ok());
      std::vector<float> single;
      for (int i = 0; i < n; ++i) {
        auto s = b->forward(std::span(window).subspan(i, 1), LogitRows::All);
        ASSERT_TRUE(s.ok());
        ASSERT_TRUE(b->commit(1).ok());
        single.insert(single.end(), s->logits.begin(), s->logits.end());
      }
      SCOPED_TRACE(::testing::Message() << "T=" << t << " n=" << n);
      expect_same_state(a->state(), b->state());
      EXPECT_TRUE(std::equal(single.begin(), single.end(), w->logits.begin()));
      // And the two go on alike: a further window gives the same bits.
      const Ids next = tokens(3, 200 + n);
      auto wa = a->forward(next, LogitRows::All), wb = b->forward(next, LogitRows::All);
      ASSERT_TRUE(wa.ok() && wb.ok());
      EXPECT_EQ(wa->logits, wb->logits);
      EXPECT_EQ(static_cast<int64_t>(wa->logits.size()), 3 * vocab);
    }
  }
}

TEST_F(ReferenceBackendTest, CommitChecksItsArgument) {
  auto a = backend(false);
  EXPECT_FALSE(a->commit(1).ok());  // no window
  ASSERT_TRUE(a->prefill(tokens(3, 1), LogitRows::None).ok());
  ASSERT_TRUE(a->forward(tokens(2, 2), LogitRows::None).ok());
  EXPECT_FALSE(a->forward(tokens(1, 3), LogitRows::None).ok());  // previous window open
  EXPECT_FALSE(a->commit(3).ok());
  EXPECT_FALSE(a->commit(0).ok());
  EXPECT_TRUE(a->commit(2).ok());
  EXPECT_FALSE(a->forward(tokens(9, 4), LogitRows::None).ok());  // more than 8 rows
}

TEST_F(ReferenceBackendTest, MtpChainsLeaveOnlyTrunkFedSlots) {
  const Ids prompt = tokens(7, 21), more = tokens(6, 22);
  auto a = backend(true), b = backend(true);
  ASSERT_TRUE(a->prefill(prompt, LogitRows::None).ok());
  ASSERT_TRUE(b->prefill(prompt, LogitRows::None).ok());
  // a: a chain of three drafts before each window; b: no chain at all.
  size_t at = 0;
  for (int t : {3, 1, 2}) {
    auto start = a->mtp_start(more[at]);
    ASSERT_TRUE(start.ok()) << start.error();
    ASSERT_TRUE(a->mtp_continue(1).ok());
    ASSERT_TRUE(a->mtp_continue(2).ok());
    ASSERT_TRUE(b->mtp_start(more[at]).ok());
    const std::span<const int32_t> w = std::span(more).subspan(at, t);
    ASSERT_TRUE(a->forward(w, LogitRows::None).ok());
    ASSERT_TRUE(a->commit(t - (t > 1 ? 1 : 0)).ok());  // a partial commit where there is room
    ASSERT_TRUE(b->forward(w.first(t - (t > 1 ? 1 : 0)), LogitRows::None).ok());
    ASSERT_TRUE(b->commit(t - (t > 1 ? 1 : 0)).ok());
    at += t - (t > 1 ? 1 : 0);
  }
  auto ra = a->mtp_start(more[at]), rb = b->mtp_start(more[at]);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(*ra, *rb);
  expect_same_state(a->state(), b->state());
  EXPECT_EQ(a->state().mtp.n, a->state().n_past);  // slots 0 .. n_past - 1
}

// Drafting reads only the newest MTP row: without mtp_all_logits mtp_start returns that row
// alone, equal to the last row of the all-rows mode, however many slots it filled.
TEST_F(ReferenceBackendTest, MtpStartReturnsOnlyTheLastRowUnlessAllAreAsked) {
  const int64_t vocab = model_->config().n_vocab;
  const Ids prompt = tokens(9, 31);
  BackendOptions o;
  o.mtp = true;
  ReferenceBackend last(*model_, o);
  o.mtp_all_logits = true;
  ReferenceBackend all(*model_, o);
  ASSERT_TRUE(last.prefill(prompt, LogitRows::None).ok());
  ASSERT_TRUE(all.prefill(prompt, LogitRows::None).ok());
  auto rl = last.mtp_start(5), ra = all.mtp_start(5);
  ASSERT_TRUE(rl.ok() && ra.ok());
  ASSERT_EQ(static_cast<int64_t>(ra->size()), vocab * static_cast<int64_t>(prompt.size()));  // slots 0 .. P - 1
  ASSERT_EQ(static_cast<int64_t>(rl->size()), vocab);
  EXPECT_TRUE(std::equal(rl->begin(), rl->end(), ra->end() - vocab));
  expect_same_state(last.state(), all.state());
}

struct Generated {
  Ids ids;
  std::vector<float> logits, mtp_logits;
  SpecStats stats;
};

Generated run_generate(const reference::Model& model, const Ids& prompt, int n, SpecConfig spec, bool record_mtp,
                 SamplerConfig sampling = {}) {
  BackendOptions o;
  o.mtp = true;
  o.mtp_all_logits = record_mtp;
  ReferenceBackend backend(model, o);
  auto sampler = Sampler::create(sampling);
  EXPECT_TRUE(sampler.ok());
  GenerateOptions go;
  go.n_generate = n;
  go.spec = spec;
  go.record_logits = true;
  go.record_mtp_logits = record_mtp;
  auto r = generate(backend, *sampler, prompt, go, [](int32_t) { return true; });
  EXPECT_TRUE(r.ok()) << r.error();
  if (!r.ok()) return {};
  return {r->ids, r->logits, r->mtp_logits, r->stats};
}

TEST_F(ReferenceBackendTest, GreedySpeculationChangesNothing) {
  const int64_t vocab = model_->config().n_vocab;
  // A repetitive prompt gives prompt lookup something to find.
  Ids repeat = tokens(5, 31);
  for (int i = 0; i < 3; ++i) repeat.insert(repeat.end(), repeat.begin(), repeat.begin() + 5);
  for (const Ids& prompt : {tokens(4, 30), repeat}) {
    for (int n : {1, 5, 19}) {
      const Generated plain = run_generate(*model_, prompt, n, {}, true);
      ASSERT_EQ(static_cast<int>(plain.ids.size()), n);
      EXPECT_EQ(static_cast<int64_t>(plain.logits.size()), (static_cast<int64_t>(prompt.size()) + n - 1) * vocab);
      EXPECT_EQ(plain.mtp_logits.size(), plain.logits.size());
      for (DraftSource src : {DraftSource::Mtp, DraftSource::Lookup, DraftSource::Auto}) {
        for (int k = 1; k <= kMaxDrafts; ++k) {
          SCOPED_TRACE(::testing::Message() << "n=" << n << " k=" << k << " source=" << static_cast<int>(src));
          const Generated spec = run_generate(*model_, prompt, n, {.max_drafts = k, .source = src}, true);
          EXPECT_EQ(spec.ids, plain.ids);
          EXPECT_EQ(spec.logits, plain.logits);
          EXPECT_EQ(spec.mtp_logits, plain.mtp_logits);
          EXPECT_EQ(spec.stats.windows + spec.stats.accepted, n - 1);
          if (n > 1 && src != DraftSource::Lookup) {
            EXPECT_GT(spec.stats.drafted, 0);
          }
        }
      }
    }
  }
}

// The trunk of a ReferenceBackend with an "MTP head" that drafts the known greedy continuation,
// except at positions divisible by 3, where it drafts a wrong token.
class OracleDrafts final : public Backend {
 public:
  OracleDrafts(ReferenceBackend& trunk, int64_t prompt_len, Ids future)
      : trunk_(trunk), prompt_len_(prompt_len), future_(std::move(future)) {}
  std::string name() const override { return "oracle drafts"; }
  int64_t n_vocab() const override { return trunk_.n_vocab(); }
  int max_window() const override { return trunk_.max_window(); }
  int64_t n_past() const override { return trunk_.n_past(); }
  Result<BackendWindow> prefill(std::span<const int32_t> t, LogitRows r) override { return trunk_.prefill(t, r); }
  Result<BackendWindow> forward(std::span<const int32_t> t, LogitRows r) override { return trunk_.forward(t, r); }
  Status commit(int n) override { return trunk_.commit(n); }
  bool has_mtp() const override { return true; }
  Result<std::vector<float>> mtp_sync() override { return std::vector<float>{}; }
  Result<std::vector<float>> mtp_start(int32_t) override {
    pos_ = trunk_.n_past() + 1;
    return guess();
  }
  Result<std::vector<float>> mtp_continue(int32_t) override {
    ++pos_;
    return guess();
  }

 private:
  std::vector<float> guess() const {
    const int64_t i = pos_ - prompt_len_;
    int32_t id = i < static_cast<int64_t>(future_.size()) ? future_[i] : 0;
    if (pos_ % 3 == 0) id = (id + 1) % static_cast<int32_t>(n_vocab());
    std::vector<float> logits(n_vocab(), 0.0f);
    logits[id] = 10.0f;
    return logits;
  }
  ReferenceBackend& trunk_;
  int64_t prompt_len_;
  Ids future_;
  int64_t pos_ = 0;
};

TEST_F(ReferenceBackendTest, RightDraftsAreAcceptedAndChangeNothing) {
  const Ids prompt = tokens(5, 40);
  const int n = 30;
  const Generated plain = run_generate(*model_, prompt, n, {}, false);
  for (int k = 1; k <= kMaxDrafts; ++k) {
    SCOPED_TRACE(::testing::Message() << "k=" << k);
    ReferenceBackend trunk(*model_, {});
    OracleDrafts backend(trunk, static_cast<int64_t>(prompt.size()), plain.ids);
    auto sampler = Sampler::create({});
    ASSERT_TRUE(sampler.ok());
    GenerateOptions go;
    go.n_generate = n;
    go.spec = {.max_drafts = k, .source = DraftSource::Mtp};
    go.record_logits = true;
    auto r = generate(backend, *sampler, prompt, go, [](int32_t) { return true; });
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->ids, plain.ids);
    EXPECT_EQ(r->logits, plain.logits);
    EXPECT_GT(r->stats.accepted, 0);
    if (k > 1) {
      EXPECT_LT(r->stats.accepted, r->stats.drafted);  // partial windows too
    }
    EXPECT_EQ(r->stats.windows + r->stats.accepted, n - 1);
  }
}

}  // namespace
}  // namespace strata::engine
