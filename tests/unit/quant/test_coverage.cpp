// Every vector file in tests/data/vectors must be exercised by a test here: a new file that no
// test reads fails this test instead of being skipped in silence.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "strata/quant/dequant.h"
#include "vector_file.h"

namespace strata::quant {
namespace {

std::set<std::string> covered_files() {
  std::set<std::string> s;
  for (Type t : testing::dequant_vector_types()) s.insert(testing::vector_stem(t) + ".txt");
  for (Type t : testing::quantize_vector_types()) s.insert(testing::vector_stem(t) + ".quantize.txt");
  return s;
}

TEST(VectorCoverage, EveryFileInTheFolderIsTested) {
  const std::set<std::string> covered = covered_files();
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::vectors_dir())) {
    if (entry.path().extension() != ".txt") continue;
    ++seen;
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(covered.count(name)) << "tests/data/vectors/" << name
                                     << " has no test: add its type to vector_file.cpp's lists";
  }
  EXPECT_EQ(seen, static_cast<int>(covered.size()));
}

TEST(VectorCoverage, EveryListedFileExists) {
  for (const std::string& name : covered_files()) {
    EXPECT_TRUE(std::filesystem::exists(testing::vectors_dir() + "/" + name)) << name << " is listed but missing";
  }
}

TEST(VectorCoverage, EveryVectorTypeHasADequantizer) {
  for (Type t : testing::dequant_vector_types()) EXPECT_TRUE(has_dequantizer(t)) << testing::vector_stem(t);
}

}  // namespace
}  // namespace strata::quant
