// The CUDA bench's arithmetic, checked without a GPU: the bytes a window reads against an
// independent reading of the file's tensor table (a shape-only synthetic slice), the expected
// tokens of a speculative window, the least-squares slope, the derived run numbers, and the
// JSON and table of a report with a CUDA section.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "strata/bench/cuda_bench.h"
#include "strata/bench/report.h"
#include "strata/reference/model.h"
#include "strata/synth/synth.h"

namespace strata::bench {
namespace {

namespace fs = std::filesystem;

bool is_routed_expert(const std::string& name) {
  return name.find("_exps.") != std::string::npos;
}

class CudaModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    synth::Options so;
    so.recipe = synth::Recipe::IQ3_XXS;
    so.layers = 4;   // GDN 0-2 (the PLE block 1), attention 3
    so.experts = 16;
    auto plan = synth::make_plan(so);
    ASSERT_TRUE(plan.ok()) << plan.error();
    std::string tmpl = (fs::temp_directory_path() / "strata-cuda-model-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    const std::string path = (fs::path(dir_) / "shape.gguf").string();
    ASSERT_TRUE(synth::write_shape_pack(*plan, path).ok());
    auto model = reference::Model::open(path, 1);
    ASSERT_TRUE(model.ok()) << model.error();
    model_ = model.value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    fs::remove_all(dir_);
  }

  // Every tensor but routed experts, token_embd and the n-gram table, from the file's table.
  static uint64_t file_dense_bytes() {
    uint64_t n = 0;
    for (const gguf::TensorInfo& t : model_->file().tensors()) {
      if (is_routed_expert(t.name) || t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight") continue;
      n += t.nbytes;
    }
    return n;
  }
  static uint64_t file_expert_bytes_per_expert() {  // summed over the 4 blocks
    uint64_t n = 0;
    for (const gguf::TensorInfo& t : model_->file().tensors()) {
      if (is_routed_expert(t.name)) n += t.nbytes / 16;
    }
    return n;
  }

  static inline std::string dir_;
  static inline reference::Model* model_ = nullptr;
};

constexpr uint64_t kKvTokenBytes = 2 * 2 * 256 * 4;          // K and V, 2 kv heads x 256, fp32
constexpr uint64_t kGdnStateBytes = 2 * 4 * 48 * 128 * 128;  // read + write, 48 v heads, d = 128

TEST_F(CudaModel, OneRowReadsDenseWeightsTopKExpertsStateAndKv) {
  const model::ModelConfig& c = model_->config();
  ASSERT_EQ(c.plan.n_trunk, 4u);
  ASSERT_EQ(c.n_expert_used, 10u);
  const ByteCounts b = window_bytes(c, model_->weights(), 100, 1);
  EXPECT_EQ(b.dense, file_dense_bytes());
  EXPECT_EQ(b.experts, 10 * file_expert_bytes_per_expert());
  EXPECT_EQ(b.embed, model_->weights().token_embd.row_bytes);
  EXPECT_EQ(b.ngram, 0u);
  EXPECT_EQ(b.state, 3 * kGdnStateBytes);
  EXPECT_EQ(b.kv, 101 * kKvTokenBytes);  // dense QSA: every cached token, the new one included
}

TEST_F(CudaModel, LongContextReadsSelectedBlocksAndBlockKeys) {
  const model::ModelConfig& c = model_->config();
  ASSERT_EQ(c.indexer_top_k, 2048u);
  ASSERT_EQ(c.compress_ratio, 4u);
  // 4096 cached after the row: 1024 complete blocks > 512 selected -> 2048 tokens + block keys.
  const ByteCounts one = window_bytes(c, model_->weights(), 4095, 1);
  EXPECT_EQ(one.kv, 2048 * kKvTokenBytes + 1024 * 128 * 4);
  // 4097 cached: the incomplete block's one token is read too.
  EXPECT_EQ(window_bytes(c, model_->weights(), 4096, 1).kv, 2049 * kKvTokenBytes + 1024 * 128 * 4);
}

TEST_F(CudaModel, WindowsBoundExpertsByDistinctRows) {
  const model::ModelConfig& c = model_->config();
  const ByteCounts t1 = window_bytes(c, model_->weights(), 100, 1);
  const ByteCounts t4 = window_bytes(c, model_->weights(), 100, 4);
  EXPECT_EQ(t4.dense, t1.dense);
  EXPECT_EQ(t4.state, t1.state);
  EXPECT_EQ(t4.embed, 4 * t1.embed);
  EXPECT_EQ(t4.experts, 16 * file_expert_bytes_per_expert());  // min(4 x 10, 16 experts)
  EXPECT_EQ(t4.kv, 104 * kKvTokenBytes);
}

TEST(CudaArithmetic, ExpectedWindowTokens) {
  EXPECT_DOUBLE_EQ(expected_window_tokens(1, 0.75), 1.0);
  EXPECT_DOUBLE_EQ(expected_window_tokens(2, 0.75), 1.75);
  EXPECT_DOUBLE_EQ(expected_window_tokens(4, 0.75), 1.0 + 0.75 + 0.5625 + 0.421875);
  EXPECT_DOUBLE_EQ(expected_window_tokens(8, 1.0), 8.0);
}

TEST(CudaArithmetic, LeastSquaresSlope) {
  const Line exact = least_squares({1, 2, 3, 4, 8}, {2.5, 3.0, 3.5, 4.0, 6.0});
  EXPECT_NEAR(exact.slope, 0.5, 1e-12);
  EXPECT_NEAR(exact.intercept, 2.0, 1e-12);
  const Line noisy = least_squares({1, 2, 3}, {1.0, 3.0, 2.0});
  EXPECT_NEAR(noisy.slope, 0.5, 1e-12);
  EXPECT_NEAR(noisy.intercept, 1.0, 1e-12);
  EXPECT_EQ(least_squares({4}, {7.0}).slope, 0.0);
}

TEST(CudaArithmetic, FinishWindowRun) {
  CudaWindowRun r;
  r.window = 4;
  r.window_ms = {2.0, 4.0, 3.0};
  r.tokens = 9;
  r.bytes.dense = 9'000'000'000;
  finish_window_run(r, 4e12);
  EXPECT_EQ(r.windows, 3);
  EXPECT_DOUBLE_EQ(r.decode_s, 0.009);
  EXPECT_DOUBLE_EQ(r.window_ms_median, 3.0);
  EXPECT_DOUBLE_EQ(r.ms_per_token, 1.0);
  EXPECT_DOUBLE_EQ(r.tok_s, 1000.0);
  EXPECT_DOUBLE_EQ(r.bytes_per_token, 1e9);
  EXPECT_DOUBLE_EQ(r.roof_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.projected_tok_s, 1000.0 * expected_window_tokens(4, 0.75) / 3.0);
  const auto shared = with_shares({{"gdn", 3.0, 10, 0.0}, {"experts", 1.0, 4, 0.0}});
  EXPECT_DOUBLE_EQ(shared[0].share, 0.75);
  EXPECT_DOUBLE_EQ(shared[1].share, 0.25);
}

TEST(CudaReport, JsonAndTableCarryTheCudaSection) {
  Report rep;
  rep.device = "cuda";
  rep.engine = "cuda-decoder";
  rep.bandwidth.gb_s = 4000;
  CudaSection c;
  c.gpu = "NVIDIA H200";
  c.graph_nodes = 1234;
  c.weight_bytes = 47'000'000'000;
  c.decode.window = 1;
  c.decode.window_ms = {1.5, 1.5};
  c.decode.tokens = 2;
  c.decode.profile = with_shares({{"experts", 0.9, 48, 0.0}, {"gdn", 0.6, 36, 0.0}});
  finish_window_run(c.decode, rep.bandwidth.bytes_per_s());
  for (int t : {1, 2, 4}) {
    CudaWindowRun r;
    r.window = t;
    r.window_ms = {1.0 + 0.25 * t};
    r.tokens = t;
    finish_window_run(r, rep.bandwidth.bytes_per_s());
    c.sweep.push_back(r);
  }
  c.slope_ms_per_row = 0.25;
  rep.cuda = c;
  const nlohmann::json j = nlohmann::json::parse(to_json(rep));
  ASSERT_TRUE(j.contains("cuda"));
  const nlohmann::json& cj = j["cuda"];
  for (const char* key : {"gpu", "weight_bytes", "state_bytes", "graph_nodes", "decode", "sweep", "slope_ms_per_row",
                          "intercept_ms", "projected_acceptance", "upload_s", "max_ctx"}) {
    EXPECT_TRUE(cj.contains(key)) << key;
  }
  EXPECT_EQ(cj["sweep"].size(), 3u);
  for (const char* key : {"window", "window_ms_median", "ms_per_token", "tok_s", "bytes_per_token", "roof_fraction",
                          "projected_tok_s_75", "expected_tokens_75", "profile", "bytes"}) {
    EXPECT_TRUE(cj["decode"].contains(key)) << key;
  }
  EXPECT_EQ(cj["decode"]["profile"][0]["stage"], "experts");
  EXPECT_DOUBLE_EQ(cj["decode"]["profile"][0]["share"].get<double>(), 0.6);
  const std::string table = to_table(rep);
  EXPECT_NE(table.find("NVIDIA H200"), std::string::npos) << table;
  EXPECT_NE(table.find("1234 graph nodes"), std::string::npos) << table;
  EXPECT_NE(table.find("slope 0.250 ms per added row"), std::string::npos) << table;
  EXPECT_NE(table.find("experts 0.900 (60%)"), std::string::npos) << table;
}

}  // namespace
}  // namespace strata::bench
