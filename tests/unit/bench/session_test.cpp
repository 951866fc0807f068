// run_bench end to end on a tiny GGUF: machine, roof, load, a sweep of two contexts, and the
// JSON that comes out is consistent with itself.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "../reference/tiny_model.h"
#include "strata/bench/session.h"

namespace strata::bench {
namespace {

class Session : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::temp_path("bench_session.gguf");
    ASSERT_TRUE(testing::write_tiny_model(testing::TinySpec{}, path_).ok());
  }
  void TearDown() override { std::filesystem::remove(path_); }

  Options options() const {
    Options o;
    o.model_path = path_;
    o.ctx = 6;
    o.gen = 3;
    o.forced = true;
    o.threads = 2;
    o.bw_bytes = 2ull << 20;  // a tiny probe: these tests check plumbing, not speed
    o.bw_passes = 2;
    o.command_line = "strata bench -m tiny.gguf";
    return o;
  }
  std::string path_;
};

TEST_F(Session, SweepProducesOneRunPerContext) {
  Options o = options();
  o.sweep_ctx = {4, 9};
  Progress quiet(false);
  auto rep = run_bench(o, quiet);
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_EQ(rep->runs.size(), 2u);
  EXPECT_EQ(rep->runs[0].ctx, 4);
  EXPECT_EQ(rep->runs[1].ctx, 9);
  EXPECT_EQ(rep->model.source, "file");
  EXPECT_EQ(rep->model.layers, testing::TinySpec{}.n_trunk);
  EXPECT_FALSE(rep->model.recipe.has_value());
  EXPECT_GT(rep->model.weight_bytes, 0u);
  EXPECT_GT(rep->peak_ram_bytes, 0u);
  EXPECT_EQ(rep->peak_vram_bytes, 0u);
  EXPECT_GT(rep->machine.threads, 0);
  EXPECT_EQ(rep->command, "strata bench -m tiny.gguf");

  const nlohmann::json j = nlohmann::json::parse(to_json(*rep));
  const double bw = j["bandwidth"]["bytes_per_s"].get<double>();
  ASSERT_GT(bw, 0.0);
  EXPECT_NEAR(j["roof_fraction"].get<double>(),
              j["decode_tok_s"].get<double>() * j["bytes_per_token"].get<double>() / bw, 1e-12);
  EXPECT_EQ(j["recipe"], nullptr);
  EXPECT_EQ(j["ctx"], 4);
}

TEST_F(Session, ForcedRunsRepeatExactly) {
  Progress quiet(false);
  auto a = run_bench(options(), quiet), b = run_bench(options(), quiet);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->runs[0].output_hash, b->runs[0].output_hash);
  EXPECT_EQ(a->runs[0].prompt_hash, b->runs[0].prompt_hash);
  EXPECT_EQ(a->runs[0].decode_bytes.total(), b->runs[0].decode_bytes.total());
}

TEST_F(Session, InvalidOptionsFailBeforeAnyWork) {
  Options o = options();
  o.device = "cuda";
  o.sweep_ctx = {16, 32};  // refused on cuda builds (cpu only) and elsewhere (no cuda)
  Progress quiet(false);
  auto rep = run_bench(o, quiet);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.error().find(cuda_built() ? "only applies to --device cpu" : "not available in this build"),
            std::string::npos)
      << rep.error();
}

}  // namespace
}  // namespace strata::bench
