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

// Every JSON carries a "spec" object whose counts agree with themselves and with the run.
void expect_consistent_spec(const nlohmann::json& j, const std::string& mode) {
  ASSERT_TRUE(j.contains("spec")) << j.dump();
  const nlohmann::json& s = j["spec"];
  EXPECT_EQ(s["mode"], mode);
  const int64_t windows = s["windows"], drafted = s["drafted"], accepted = s["accepted"], tokens = s["tokens"];
  EXPECT_GT(windows, 0);
  EXPECT_LE(accepted, drafted);
  EXPECT_EQ(tokens, windows + accepted);
  EXPECT_EQ(tokens, j["runs"][0]["tokens_generated"].get<int64_t>());
  EXPECT_EQ(windows, j["runs"][0]["windows"].get<int64_t>());
  EXPECT_DOUBLE_EQ(s["acceptance_rate"].get<double>(), drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0);
  EXPECT_DOUBLE_EQ(s["accepted_per_window"].get<double>(), static_cast<double>(accepted) / windows);
  EXPECT_DOUBLE_EQ(s["tokens_per_window"].get<double>(), static_cast<double>(tokens) / windows);
  EXPECT_DOUBLE_EQ(s["decode_tok_s"].get<double>(), j["decode_tok_s"].get<double>());
  EXPECT_EQ(s["windows"], j["runs"][0]["spec"]["windows"]);
  EXPECT_EQ(s["accepted"], j["runs"][0]["spec"]["accepted"]);
}

TEST_F(Session, SpecObjectInEveryMode) {
  Progress quiet(false);
  Options o = options();
  o.gen = 8;
  o.window = 4;
  o.accept = {1, 3};
  auto forced = run_bench(o, quiet);
  ASSERT_TRUE(forced.ok()) << forced.error();
  nlohmann::json j = nlohmann::json::parse(to_json(*forced));
  expect_consistent_spec(j, "forced");
  EXPECT_EQ(j["spec"]["drafted"], 3 * j["spec"]["windows"].get<int64_t>());
  EXPECT_EQ(j["spec"]["max_drafts"], 3);

  o = options();
  o.gen = 8;
  o.forced = false;
  auto plain = run_bench(o, quiet);
  ASSERT_TRUE(plain.ok()) << plain.error();
  j = nlohmann::json::parse(to_json(*plain));
  expect_consistent_spec(j, "off");
  EXPECT_EQ(j["spec"]["drafted"], 0);

  for (const char* source : {"lookup", "mtp", "auto"}) {
    o.spec = 3;
    o.spec_source = source;
    auto spec = run_bench(o, quiet);
    ASSERT_TRUE(spec.ok()) << spec.error();
    j = nlohmann::json::parse(to_json(*spec));
    SCOPED_TRACE(source);
    expect_consistent_spec(j, "drafts");
    EXPECT_EQ(j["spec"]["source"], source);
    EXPECT_EQ(j["spec"]["max_drafts"], 3);
    EXPECT_EQ(j["spec"]["backend"], "fp32 reference");
    EXPECT_EQ(j["spec"]["mtp_available"], std::string(source) != "lookup");  // the tiny model has an MTP block
    EXPECT_EQ(j["spec"]["tokens"], 8);
    // Greedy tokens do not depend on drafting.
    EXPECT_EQ(spec->runs[0].output_hash, plain->runs[0].output_hash);
    const std::string table = to_table(*spec);
    EXPECT_NE(table.find("speculation (--spec 3, source " + std::string(source) + ")"), std::string::npos) << table;
  }
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
