#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "strata/reference/npy.h"
#include "tiny_model.h"

namespace strata::reference {
namespace {

TEST(Npy, HeaderAndData) {
  const std::string path = testing::temp_path("t.npy");
  const std::vector<float> v = {1.0f, -2.5f, 3.0f, 4.0f, 5.0f, 6.0f};
  ASSERT_TRUE(write_npy_f32(path, v, 2, 3).ok());
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  ASSERT_GE(bytes.size(), 64u + 24u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(bytes[6], 1);
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(header.find("'shape': (2, 3)"), std::string::npos);
  EXPECT_EQ(header.back(), '\n');
  ASSERT_EQ(bytes.size(), 10 + header_len + 24);
  std::vector<float> back(6);
  std::memcpy(back.data(), bytes.data() + 10 + header_len, 24);
  EXPECT_EQ(back, v);
  EXPECT_FALSE(write_npy_f32(path, v, 4, 2).ok());
}

}  // namespace
}  // namespace strata::reference
