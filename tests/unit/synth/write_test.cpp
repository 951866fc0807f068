// A written slice read back: every tensor's type, shape, bytes and shard against the plan,
// every block dequantizing to finite values, the table left as a hole, the model loader
// accepting the pack, and generate() reproducing the file's bytes from any range.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <thread>

#include "strata/gguf/gguf.h"
#include "strata/model/config.h"
#include "strata/model/weights.h"
#include "strata/quant/dequant.h"
#include "strata/synth/synth.h"
#include "temp_dir.h"

namespace strata::synth {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

Plan make(Options o) {
  auto plan = make_plan(o);
  EXPECT_TRUE(plan.ok()) << plan.error();
  return std::move(plan.value());
}

// Dequantizes rows [first, first + n) of t and returns how many values are not finite.
uint64_t non_finite_rows(const gguf::TensorInfo& t, uint64_t first, uint64_t n) {
  std::vector<float> row(static_cast<size_t>(t.ne[0]));
  uint64_t bad = 0;
  for (uint64_t r = first; r < first + n; ++r) {
    Status s = quant::dequantize_row(t.type, t.data + r * t.row_bytes(), row.data(), t.ne[0]);
    if (!s.ok()) return UINT64_MAX;
    for (float v : row) bad += std::isfinite(v) ? 0 : 1;
  }
  return bad;
}

// Every row, except for the vocabulary-sized tensors (636M values each, minutes of scalar
// dequantization on a small CI box) where every 61st row is checked; their blocks come from
// the same generator as every other tensor's.
uint64_t check_finite(const gguf::TensorInfo& t) {
  const bool huge = t.n_elements > 200'000'000;
  if (!huge) return non_finite_rows(t, 0, t.n_rows());
  uint64_t bad = 0;
  for (uint64_t r = 0; r < t.n_rows(); r += 61) bad += non_finite_rows(t, r, 1);
  return bad + non_finite_rows(t, t.n_rows() - 1, 1);
}

TEST(SynthWrite, SliceReadsBackAsPlanned) {
  Options o;
  o.recipe = Recipe::IQ2_XS;
  o.layers = 4;
  o.experts = 16;
  o.mtp = true;
  const Plan plan = make(o);
  TempDir dir("strata-synth");
  auto paths = write_pack(plan, dir.path());
  ASSERT_TRUE(paths.ok()) << paths.error();
  ASSERT_EQ(paths->size(), 2u);
  EXPECT_EQ(fs::path((*paths)[1]).filename().string(), plan.shards[1].path);

  auto model = gguf::Model::open((*paths)[0]);
  ASSERT_TRUE(model.ok()) << model.error();
  ASSERT_EQ(model->tensors().size(), plan.tensors.size());
  EXPECT_EQ(*model->metadata().get_u32("qwen4exp.block_count"), 5u);
  EXPECT_EQ(*model->metadata().get_string("strata.synth.recipe"), "iq2_xs");

  // Type, shape, bytes and shard of every tensor; finite values in every block, checked on
  // all cores because scalar dequantization of ~1.5 G values is the slow part of this test.
  std::vector<std::future<std::string>> checks;
  for (const TensorPlan& p : plan.tensors) {
    const gguf::TensorInfo* t = model->find(p.name);
    ASSERT_NE(t, nullptr) << p.name;
    EXPECT_EQ(t->type, p.type) << p.name;
    ASSERT_EQ(t->n_dims, p.ne.size()) << p.name;
    for (size_t d = 0; d < p.ne.size(); ++d) EXPECT_EQ(t->ne[d], p.ne[d]) << p.name;
    EXPECT_EQ(t->nbytes, p.nbytes) << p.name;
    EXPECT_EQ(t->shard, p.shard) << p.name;
    if (p.role == Role::NgramTable) continue;
    checks.push_back(std::async(std::launch::async, [t] {
      const uint64_t bad = check_finite(*t);
      return bad == 0 ? std::string() : t->name + ": " + std::to_string(bad) + " bad values";
    }));
    if (checks.size() >= std::max(2u, std::thread::hardware_concurrency())) {
      std::string problem = checks.front().get();
      EXPECT_TRUE(problem.empty()) << problem;
      checks.erase(checks.begin());
    }
  }
  for (auto& f : checks) {
    std::string problem = f.get();
    EXPECT_TRUE(problem.empty()) << problem;
  }

  // The table: a hole on disk whose blocks read back as valid zero blocks.
  const gguf::TensorInfo* table = model->find("per_layer_token_embd.weight");
  ASSERT_NE(table, nullptr);
  struct stat st {};
  ASSERT_EQ(::stat((*paths)[1].c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 28'800'138'432u);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{1} << 20) << "the table shard is not sparse";
  std::vector<float> row(160);
  for (uint64_t r : {uint64_t{0}, uint64_t{123'456'789}, table->n_rows() - 1}) {
    ASSERT_TRUE(quant::dequantize_row(table->type, table->data + r * table->row_bytes(), row.data(), 160).ok());
    for (float v : row) EXPECT_EQ(v, 0.0f);
  }

  // The engine's own loader accepts the pack: metadata, layer plan and every tensor binding.
  auto config = model::load_config(model->metadata(), model->path());
  ASSERT_TRUE(config.ok()) << config.error();
  EXPECT_EQ(config->plan.n_trunk, 4u);
  EXPECT_TRUE(config->plan.has_mtp());
  EXPECT_TRUE(config->plan.has_ple());
  auto weights = model::bind_weights(*model, *config);
  EXPECT_TRUE(weights.ok()) << weights.error();

  // generate() gives the file's bytes for a range that starts and ends mid-chunk, and for one
  // expert of a 3-D tensor.
  const TensorPlan* qkv = plan.find("blk.0.attn_qkv.weight");
  std::vector<uint8_t> bytes(3'000'001);
  ASSERT_TRUE(generate(plan, *qkv, 777'777, bytes).ok());
  EXPECT_EQ(0, std::memcmp(bytes.data(), model->find(qkv->name)->data + 777'777, bytes.size()));
  const TensorPlan* down = plan.find("blk.2.ffn_down_exps.weight");
  const ByteRange e7 = expert_range(*down, 7);
  EXPECT_EQ(e7.size, down->nbytes / 16);
  bytes.resize(e7.size);
  ASSERT_TRUE(generate(plan, *down, e7.offset, bytes).ok());
  EXPECT_EQ(0, std::memcmp(bytes.data(), model->find(down->name)->data + e7.offset, bytes.size()));
}

TEST(SynthWrite, UdSliceUsesSplitLayoutAndLoads) {
  Options o;
  o.recipe = Recipe::UD_Q4_K_XL;
  o.layers = 2;
  o.experts = 10;
  const Plan plan = make(o);
  ASSERT_EQ(plan.shards.size(), 2u);  // metadata only, then everything (under 50 GB)
  EXPECT_EQ(plan.shards[0].n_tensors, 0u);
  TempDir dir("strata-synth");
  auto paths = write_pack(plan, dir.path());
  ASSERT_TRUE(paths.ok()) << paths.error();
  auto model = gguf::Model::open((*paths)[1]);
  ASSERT_TRUE(model.ok()) << model.error();
  EXPECT_EQ(model->tensors().size(), plan.tensors.size());
  auto config = model::load_config(model->metadata(), model->path());
  ASSERT_TRUE(config.ok()) << config.error();
  auto weights = model::bind_weights(*model, *config);
  EXPECT_TRUE(weights.ok()) << weights.error();
  const gguf::TensorInfo* t = model->find("blk.1.ffn_gate_exps.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, quant::Type::Q4_K);
  EXPECT_EQ(check_finite(*t), 0u);
}

TEST(SynthWrite, InMemoryPackOpensWithoutFiles) {
  Options o;
  o.recipe = Recipe::Q2_0;
  o.layers = 1;
  o.experts = 10;
  const Plan plan = make(o);
  MemoryOptions mo;
  mo.ram_dir = fs::temp_directory_path().string();  // any directory works; RAM-backed by default
  uint64_t last = 0;
  mo.write.progress = [&last](const Progress& p) { last = p.done_bytes; };
  auto model = open_in_memory(plan, mo);
  ASSERT_TRUE(model.ok()) << model.error();
  EXPECT_EQ(last, plan.written_bytes());
  EXPECT_FALSE(fs::exists(model->path()));  // unlinked: only the mapping holds it
  EXPECT_EQ(model->tensors().size(), plan.tensors.size());
  EXPECT_EQ(model->shards().size(), 1u);
  const TensorPlan* router = plan.find("blk.0.ffn_gate_inp.weight");
  std::vector<uint8_t> bytes(router->nbytes);
  ASSERT_TRUE(generate(plan, *router, 0, bytes).ok());
  EXPECT_EQ(0, std::memcmp(bytes.data(), model->find(router->name)->data, bytes.size()));

  // The RamPack form: the file exists while the pack lives, for loaders that take a path.
  std::string path;
  {
    auto pack = write_ram_pack(plan, mo);
    ASSERT_TRUE(pack.ok()) << pack.error();
    path = pack->path();
    EXPECT_GT(fs::file_size(path), plan.written_bytes());  // one unsplit file: no split.* keys
  }
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace strata::synth
