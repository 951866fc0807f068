// The shape-only pack at the full released geometry: a file of holes whose metadata, tensor
// names, types, shapes and sizes are the plan's, small on disk, and accepted by the model
// loader (load_config + bind_weights), as the CUDA bench opens it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "strata/gguf/gguf.h"
#include "strata/model/config.h"
#include "strata/model/weights.h"
#include "strata/synth/synth.h"
#include "temp_dir.h"

namespace strata::synth {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

// The header (keys, a 248k-token vocabulary, ~1.6k tensor infos) is a few MB; anything near
// the tensor data's size means holes were written as data.
constexpr uint64_t kMaxAllocatedBytes = uint64_t{64} << 20;

TEST(SynthShapePack, FullGeometryIsHolesWithThePlansLayout) {
  Options o;
  o.recipe = Recipe::IQ3_XXS;  // the released geometry: 48 layers, 512 experts
  auto plan = make_plan(o);
  ASSERT_TRUE(plan.ok()) << plan.error();
  TempDir dir("strata-shape");
  const std::string path = (fs::path(dir.path()) / "shape.gguf").string();
  const Status written = write_shape_pack(*plan, path);
  ASSERT_TRUE(written.ok()) << written.message();

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_GT(static_cast<uint64_t>(st.st_size), plan->total_bytes());  // header + every tensor
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, kMaxAllocatedBytes) << "the pack is not sparse";

  auto model = gguf::Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error();
  EXPECT_EQ(model->shards().size(), 1u);

  // Metadata: exactly the plan's keys and values (one unsplit file adds no split.* keys).
  const gguf::Metadata& md = model->metadata();
  EXPECT_EQ(md.size(), plan->metadata.size());
  for (const gguf::KeyValue& kv : plan->metadata.entries()) {
    const gguf::Value* v = md.find(kv.key);
    ASSERT_NE(v, nullptr) << kv.key;
    EXPECT_TRUE(*v == kv.value) << kv.key;
  }

  // Tensor infos: names in file order, types, shapes and sizes.
  ASSERT_EQ(model->tensors().size(), plan->tensors.size());
  for (size_t i = 0; i < plan->tensors.size(); ++i) {
    const TensorPlan& p = plan->tensors[i];
    const gguf::TensorInfo& t = model->tensors()[i];
    EXPECT_EQ(t.name, p.name);
    EXPECT_EQ(t.type, p.type) << p.name;
    ASSERT_EQ(t.n_dims, p.ne.size()) << p.name;
    for (size_t d = 0; d < p.ne.size(); ++d) EXPECT_EQ(t.ne[d], p.ne[d]) << p.name;
    EXPECT_EQ(t.nbytes, p.nbytes) << p.name;
  }

  // The engine's loader accepts it: config, layer plan and every binding.
  auto config = model::load_config(md, path);
  ASSERT_TRUE(config.ok()) << config.error();
  EXPECT_EQ(config->plan.n_trunk, 48u);
  EXPECT_EQ(config->n_expert, 512u);
  auto weights = model::bind_weights(*model, *config);
  ASSERT_TRUE(weights.ok()) << weights.error();
  EXPECT_EQ(weights->blocks.size(), 48u);
}

}  // namespace
}  // namespace strata::synth
