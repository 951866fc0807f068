// `strata run` end to end on a tiny model: generated ids, the .npy shapes and values
// (against the in-process reference), --mtp-logits-out and --no-chunked.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "strata/reference/forward.h"
#include "tiny_model.h"

namespace strata {
namespace {

struct Npy {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
};

Npy read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Npy n;
  if (b.size() < 10) return n;
  const size_t len = static_cast<uint8_t>(b[8]) | (static_cast<uint8_t>(b[9]) << 8);
  const std::string header = b.substr(10, len);
  const size_t p = header.find("'shape': (");
  std::sscanf(header.c_str() + p, "'shape': (%ld, %ld)", &n.rows, &n.cols);
  n.data.resize((b.size() - 10 - len) / 4);
  std::memcpy(n.data.data(), b.data() + 10 + len, n.data.size() * 4);
  return n;
}

struct Proc {
  int rc = -1;
  std::string out;
};

Proc run(const std::string& args) {
  Proc p;
  FILE* f = popen((std::string(STRATA_BINARY) + " run " + args + " 2>/dev/null").c_str(), "r");
  if (!f) return p;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) p.out.append(buf, n);
  p.rc = pclose(f);
  return p;
}

class RunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(STRATA_BINARY)) GTEST_SKIP() << "strata binary not built: " << STRATA_BINARY;
    model_ = testing::temp_path("run_cli.gguf");
    ASSERT_TRUE(testing::write_tiny_model(spec_, model_).ok());
  }
  void TearDown() override {
    for (const std::string& p : {model_, logits_, mtp_}) std::remove(p.c_str());
  }
  testing::TinySpec spec_;
  std::string model_, logits_ = testing::temp_path("run_logits.npy"), mtp_ = testing::temp_path("run_mtp.npy");
};

TEST_F(RunCli, LogitsAndMtpMatchTheInProcessReference) {
  const std::vector<int32_t> prompt = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 32, 38, 4, 6, 26};
  std::string ids;
  for (int32_t t : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  const int n_gen = 5;
  const Proc p = run("-m " + model_ + " --tokens " + ids + " -n " + std::to_string(n_gen) + " --logits-out " + logits_ +
                     " --mtp-logits-out " + mtp_ + " --threads 2");
  ASSERT_EQ(p.rc, 0) << p.out;

  // The same computation in process: prompt in one pass, then one token at a time.
  auto m = reference::Model::open(model_, 1);
  ASSERT_TRUE(m.ok()) << m.error();
  reference::SequenceState st = reference::SequenceState::create((*m)->config());
  auto out = reference::forward(**m, st, prompt);
  ASSERT_TRUE(out.ok());
  const int64_t v = spec_.vocab, w = (*m)->config().n_wide();
  std::vector<float> logits = out->logits;
  auto mtp = reference::forward_mtp(**m, st, std::span(out->wide).first((prompt.size() - 1) * w),
                                    std::span(prompt).subspan(1));
  ASSERT_TRUE(mtp.ok()) << mtp.error();
  std::vector<float> mtp_rows = mtp->logits;
  std::vector<float> last(out->logits.end() - v, out->logits.end()), wide(out->wide.end() - w, out->wide.end());
  std::vector<int32_t> gen;
  for (int i = 0; i < n_gen; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    gen.push_back(next);
    auto d = reference::forward_mtp(**m, st, wide, {&next, 1});
    mtp_rows.insert(mtp_rows.end(), d->logits.begin(), d->logits.end());
    if (i + 1 == n_gen) break;
    auto s = reference::forward(**m, st, {&next, 1});
    logits.insert(logits.end(), s->logits.begin(), s->logits.end());
    last = s->logits;
    wide = s->wide;
  }
  std::string want;
  for (int32_t t : gen) want += (want.empty() ? "" : ",") + std::to_string(t);
  EXPECT_EQ(p.out, want + "\n");

  const Npy a = read_npy(logits_), b = read_npy(mtp_);
  EXPECT_EQ(a.rows, static_cast<int64_t>(prompt.size()) + n_gen - 1);
  EXPECT_EQ(a.cols, v);
  EXPECT_EQ(a.data, logits);  // bit-identical: thread count does not change results
  EXPECT_EQ(b.rows, static_cast<int64_t>(prompt.size()) + n_gen - 1);
  EXPECT_EQ(b.data, mtp_rows);
}

TEST_F(RunCli, NoChunkedAgreesWithinTolerance) {
  const std::string ids = "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20";
  ASSERT_EQ(run("-m " + model_ + " --tokens " + ids + " -n 3 --logits-out " + logits_).rc, 0);
  const Npy a = read_npy(logits_);
  ASSERT_EQ(run("-m " + model_ + " --tokens " + ids + " -n 3 --no-chunked --logits-out " + logits_).rc, 0);
  const Npy b = read_npy(logits_);
  ASSERT_EQ(a.data.size(), b.data.size());
  float diff = 0, scale = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    diff = std::max(diff, std::fabs(a.data[i] - b.data[i]));
    scale = std::max(scale, std::fabs(a.data[i]));
  }
  EXPECT_LE(diff, 1e-4f * scale);
  EXPECT_NE(a.data, b.data);
}

TEST_F(RunCli, ZeroGeneratedTokensAndErrors) {
  ASSERT_EQ(run("-m " + model_ + " --tokens 1,2,3 -n 0 --logits-out " + logits_ + " --mtp-logits-out " + mtp_).rc, 0);
  EXPECT_EQ(read_npy(logits_).rows, 3);
  EXPECT_EQ(read_npy(mtp_).rows, 2);
  EXPECT_NE(run("-m " + model_ + " --tokens 1,x,3").rc, 0);
  EXPECT_NE(run("-m " + model_ + " --tokens 1,64").rc, 0);  // vocab is 64
  EXPECT_NE(run("-m /nonexistent.gguf --tokens 1").rc, 0);
}

}  // namespace
}  // namespace strata
