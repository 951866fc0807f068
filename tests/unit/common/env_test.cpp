// parse_env_int: the STRATA_* integer switches take whole integers in range and name the variable
// when a value is refused.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "strata/common/env.h"

namespace strata {
namespace {

TEST(EnvInt, UnsetIsNoValue) {
  auto r = parse_env_int("STRATA_X", nullptr, 1, 512);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(EnvInt, WholeIntegersInRange) {
  for (const auto& [text, want] : {std::pair{"1", 1}, {"512", 512}, {"128", 128}, {"+7", 7}, {"007", 7}}) {
    auto r = parse_env_int("STRATA_X", text, 1, 512);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error();
    ASSERT_TRUE(r->has_value()) << text;
    EXPECT_EQ(**r, want) << text;
  }
}

TEST(EnvInt, RefusedValuesNameTheVariableRangeAndText) {
  for (const char* text : {"", "0", "513", "-1", "12a", "1.5", " 5", "5 ", "x", "99999999999999999999999"}) {
    auto r = parse_env_int("STRATA_ATTN_SPLITS", text, 1, 512);
    ASSERT_FALSE(r.ok()) << '"' << text << '"';
    EXPECT_EQ(r.error(), std::string("STRATA_ATTN_SPLITS: expected an integer in [1, 512], got \"") + text + "\"");
  }
}

}  // namespace
}  // namespace strata
