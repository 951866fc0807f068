#include "vector_file.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace strata::quant::testing {
namespace {

bool parse_hex(const std::string& s, std::vector<uint8_t>* out) {
  if (s.size() % 2 != 0) return false;
  for (size_t i = 0; i < s.size(); i += 2) {
    char* end = nullptr;
    const std::string byte = s.substr(i, 2);
    const long v = std::strtol(byte.c_str(), &end, 16);
    if (end != byte.c_str() + 2) return false;
    out->push_back(static_cast<uint8_t>(v));
  }
  return true;
}

// %a hex floats, parsed by strtof (exact: every value was printed from a binary32).
bool parse_floats(std::istringstream& in, std::vector<float>* out) {
  std::string tok;
  while (in >> tok) {
    char* end = nullptr;
    const float v = std::strtof(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size()) return false;
    out->push_back(v);
  }
  return true;
}

}  // namespace

VectorFile read_vector_file(const std::string& path) {
  VectorFile f;
  f.path = path;
  std::ifstream in(path);
  if (!in) {
    f.error = "cannot open " + path;
    return f;
  }
  std::string line;
  int lineno = 0;
  VectorRecord cur;
  bool have_block = false, have_floats = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    bool ok = false;
    if (key == "block_hex" && !have_block) {
      std::string hex;
      ls >> hex;
      ok = parse_hex(hex, &cur.block);
      have_block = true;
    } else if ((key == "values" || key == "input") && !have_floats) {
      ok = parse_floats(ls, &cur.floats);
      have_floats = true;
    }
    if (!ok) {
      f.error = path + ":" + std::to_string(lineno) + ": unexpected or malformed line '" + line.substr(0, 40) + "'";
      return f;
    }
    if (have_block && have_floats) {
      f.records.push_back(std::move(cur));
      cur = VectorRecord{};
      have_block = have_floats = false;
    }
  }
  if (have_block || have_floats) f.error = path + ": last record is incomplete";
  return f;
}

std::string vectors_dir() { return std::string(STRATA_TEST_DATA) + "/vectors"; }

const std::vector<Type>& dequant_vector_types() {
  static const std::vector<Type> kTypes = {
      Type::Q4_0,   Type::Q4_1,    Type::Q5_0,   Type::Q5_1,  Type::Q8_0,    Type::Q1_0,    Type::Q2_0,
      Type::Q2_K,   Type::Q3_K,    Type::Q4_K,   Type::Q5_K,  Type::Q6_K,    Type::Q8_K,    Type::IQ1_S,
      Type::IQ1_M,  Type::IQ2_XXS, Type::IQ2_XS, Type::IQ2_S, Type::IQ3_XXS, Type::IQ3_S,   Type::IQ4_NL,
      Type::IQ4_XS, Type::TQ1_0,   Type::TQ2_0,  Type::MXFP4, Type::NVFP4,
  };
  return kTypes;
}

const std::vector<Type>& quantize_vector_types() {
  static const std::vector<Type> kTypes = {Type::Q8_0, Type::Q8_1, Type::Q8_K};
  return kTypes;
}

std::string vector_stem(Type t) {
  std::string s(type_info(t)->name);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace strata::quant::testing
