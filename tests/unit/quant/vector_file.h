// Test helper: reads tests/data/vectors/<TYPE>.txt (dequantization: block_hex + values) and
// <TYPE>.quantize.txt (input + block_hex), formats/README.md "vectors/". Also the list of vector
// files the quant tests cover, so a new file in the folder cannot go untested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/quant/types.h"

namespace strata::quant::testing {

struct VectorRecord {
  std::vector<uint8_t> block;  // block_hex
  std::vector<float> floats;   // values (dequant files) or input (quantize files)
};

struct VectorFile {
  std::string path;
  std::vector<VectorRecord> records;
  std::string error;  // empty when the file parsed
};

// Parses a file. For dequant files each record is a block_hex line followed by its values
// line; for quantize files an input line followed by its block_hex line.
VectorFile read_vector_file(const std::string& path);

std::string vectors_dir();

// Types with a <TYPE>.txt dequantization vector file, and those with <TYPE>.quantize.txt.
const std::vector<Type>& dequant_vector_types();
const std::vector<Type>& quantize_vector_types();

// Upper-case file stem of a type: "Q4_K", "IQ2_XXS" (ggml names are lower case except _K).
std::string vector_stem(Type t);

}  // namespace strata::quant::testing
