// The generated tables against the properties the spec states for them (formats/README.md
// "tables/", spec §4.4 and §4.7): catches a generator that reorders, truncates or mis-signs.
#include <gtest/gtest.h>

#include <bit>
#include <set>

#include "strata/quant/tables_data.h"

namespace strata::quant {
namespace {

template <class T, size_t N>
std::set<int> grid_bytes(const T (&grid)[N], int bytes_per_entry, bool is_signed) {
  std::set<int> s;
  for (const T& e : grid) {
    for (int k = 0; k < bytes_per_entry; ++k) {
      const auto byte = static_cast<uint8_t>(static_cast<uint64_t>(e) >> (8 * k));
      s.insert(is_signed ? static_cast<int8_t>(byte) : byte);
    }
  }
  return s;
}

TEST(Tables, SignTables) {
  for (int k = 0; k < 8; ++k) EXPECT_EQ(kmask_iq2xs[k], 1 << k);
  for (int k = 0; k < 128; ++k) {
    EXPECT_EQ(ksigns_iq2xs[k], k | ((std::popcount(static_cast<unsigned>(k)) & 1) << 7)) << k;
    for (int b = 0; b < 8; ++b) {
      const int byte = static_cast<int>((ksigns64[k] >> (8 * b)) & 0xFF);
      EXPECT_EQ(byte, (ksigns_iq2xs[k] >> b) & 1 ? 0xFF : 0x00) << "ksigns64[" << k << "] byte " << b;
    }
  }
}

TEST(Tables, Levels) {
  const int iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  const int fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(kvalues_iq4nl[i], iq4nl[i]) << i;
    EXPECT_EQ(kvalues_fp4[i], fp4[i]) << i;
  }
}

TEST(Tables, GridValueSets) {
  EXPECT_EQ(std::size(iq2xxs_grid), 256u);
  EXPECT_EQ(std::size(iq2xs_grid), 512u);
  EXPECT_EQ(std::size(iq2s_grid), 1024u);
  EXPECT_EQ(std::size(iq3xxs_grid), 256u);
  EXPECT_EQ(std::size(iq3s_grid), 512u);
  EXPECT_EQ(std::size(iq1s_grid), 2048u);
  EXPECT_EQ(std::size(iq1s_grid_gpu), 2048u);
  const std::set<int> iq2 = {8, 25, 43};
  EXPECT_EQ(grid_bytes(iq2xxs_grid, 8, false), iq2);
  EXPECT_EQ(grid_bytes(iq2xs_grid, 8, false), iq2);
  EXPECT_EQ(grid_bytes(iq2s_grid, 8, false), iq2);
  EXPECT_EQ(grid_bytes(iq3xxs_grid, 4, false), (std::set<int>{4, 12, 20, 28, 36, 44, 52, 62}));
  EXPECT_EQ(grid_bytes(iq3s_grid, 4, false), (std::set<int>{1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_EQ(grid_bytes(iq1s_grid, 8, true), (std::set<int>{-1, 0, 1}));
}

// iq1s_grid_gpu packs the same codebook as 4-bit value+1 fields: element k < 4 in the low nibble
// of byte k, element k >= 4 in the high nibble of byte k - 4.
TEST(Tables, Iq1sGpuMatchesIq1s) {
  for (int i = 0; i < 2048; ++i) {
    for (int k = 0; k < 8; ++k) {
      const int v = static_cast<int8_t>(static_cast<uint8_t>(iq1s_grid[i] >> (8 * k)));
      const int byte = static_cast<int>((iq1s_grid_gpu[i] >> (8 * (k & 3))) & 0xFF);
      const int nibble = k < 4 ? (byte & 15) : (byte >> 4);
      ASSERT_EQ(nibble, v + 1) << "entry " << i << " element " << k;
    }
  }
}

}  // namespace
}  // namespace strata::quant
