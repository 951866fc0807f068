// parse_switches: every STRATA_* switch of the CUDA decoder takes the values it documents and
// refuses any other with the variable's name (no GPU needed).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "strata/cuda/switches.h"

namespace strata::cuda {
namespace {

Result<Switches> parse(const std::map<std::string, std::string>& env) {
  return parse_switches([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(CudaSwitches, UnsetAreTheDefaults) {
  auto s = parse({});
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(s->pdl);
  EXPECT_TRUE(s->side_stream);
  EXPECT_TRUE(s->grouped_direct);
  EXPECT_FALSE(s->direct_wide_t1);
  EXPECT_TRUE(s->direct_stage);
  EXPECT_EQ(s->attn_splits, 0);
  EXPECT_TRUE(s->hc_post_blocked);
  EXPECT_TRUE(s->mmvq_mma);
  EXPECT_FALSE(s->unfuse_gdn_norm);
  EXPECT_FALSE(s->unfuse_combine);
  EXPECT_FALSE(s->unfuse_shared_down);
}

TEST(CudaSwitches, TheOtherArms) {
  auto s = parse({{"STRATA_PDL", "0"},
                  {"STRATA_SIDE_STREAM", "0"},
                  {"STRATA_GROUPED_DIRECT", "0"},
                  {"STRATA_DIRECT_WARPS", "8"},
                  {"STRATA_DIRECT_STAGE", "0"},
                  {"STRATA_ATTN_SPLITS", "256"},
                  {"STRATA_HC_POST_BLOCKED", "0"},
                  {"STRATA_MMVQ_MMA", "0"},
                  {"STRATA_UNFUSE", "combine,gdn-norm,shared-down,gdn-gates"}});
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_FALSE(s->pdl);
  EXPECT_FALSE(s->side_stream);
  EXPECT_FALSE(s->grouped_direct);
  EXPECT_TRUE(s->direct_wide_t1);
  EXPECT_FALSE(s->direct_stage);
  EXPECT_EQ(s->attn_splits, 256);
  EXPECT_FALSE(s->hc_post_blocked);
  EXPECT_FALSE(s->mmvq_mma);
  EXPECT_TRUE(s->unfuse_gdn_norm);
  EXPECT_TRUE(s->unfuse_gdn_gates);
  EXPECT_TRUE(s->unfuse_combine);
  EXPECT_TRUE(s->unfuse_shared_down);
  auto one = parse({{"STRATA_UNFUSE", "gdn-norm"}, {"STRATA_DIRECT_WARPS", "5"}, {"STRATA_PDL", "1"},
                    {"STRATA_HC_POST_BLOCKED", "1"}});
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_TRUE(one->unfuse_gdn_norm);
  EXPECT_FALSE(one->unfuse_gdn_gates);
  EXPECT_FALSE(one->unfuse_combine);
  EXPECT_FALSE(one->unfuse_shared_down);
  EXPECT_FALSE(one->direct_wide_t1);
  EXPECT_TRUE(one->pdl);
  EXPECT_TRUE(one->hc_post_blocked);
}

TEST(CudaSwitches, RefusedValuesNameTheVariable) {
  const std::map<std::string, std::string> bad[] = {
      {{"STRATA_PDL", "yes"}},          {{"STRATA_PDL", "2"}},
      {{"STRATA_SIDE_STREAM", "off"}},  {{"STRATA_GROUPED_DIRECT", "-1"}},
      {{"STRATA_DIRECT_WARPS", "6"}},   {{"STRATA_DIRECT_WARPS", "16"}},
      {{"STRATA_ATTN_SPLITS", "0"}},    {{"STRATA_ATTN_SPLITS", "513"}},
      {{"STRATA_MMVQ_MMA", "2"}},       {{"STRATA_MMVQ_MMA", "on"}},
      {{"STRATA_DIRECT_STAGE", "no"}},
      {{"STRATA_HC_POST_BLOCKED", "2"}},
      {{"STRATA_UNFUSE", "gdn_norm"}},  {{"STRATA_UNFUSE", "combine,,gdn-norm"}},
      {{"STRATA_UNFUSE", "shared_down"}},
  };
  for (const auto& env : bad) {
    const std::string& name = env.begin()->first;
    auto s = parse(env);
    ASSERT_FALSE(s.ok()) << name << "=" << env.begin()->second;
    EXPECT_EQ(s.error().rfind(name + ": expected", 0), 0u) << s.error();
    EXPECT_NE(s.error().find('"' + env.begin()->second + '"'), std::string::npos) << s.error();
  }
}

}  // namespace
}  // namespace strata::cuda
