// The type table (spec/quant-formats.md §2). Sizes are the on-disk block sizes of ggml;
// Q8_1 is 36 bytes (two f16 + 32 int8), not gguf-py's stale 40.
#include "strata/quant/types.h"

#include <array>
#include <cctype>

namespace strata::quant {
namespace {

constexpr std::array<TypeInfo, kTypeCount> kTable = {{
    {0, "f32", 1, 4, false},       {1, "f16", 1, 2, false},
    {2, "q4_0", 32, 18, true},     {3, "q4_1", 32, 20, true},
    {4, "q4_2", 0, 0, true},       {5, "q4_3", 0, 0, true},
    {6, "q5_0", 32, 22, true},     {7, "q5_1", 32, 24, true},
    {8, "q8_0", 32, 34, true},     {9, "q8_1", 32, 36, true},
    {10, "q2_K", 256, 84, true},   {11, "q3_K", 256, 110, true},
    {12, "q4_K", 256, 144, true},  {13, "q5_K", 256, 176, true},
    {14, "q6_K", 256, 210, true},  {15, "q8_K", 256, 292, true},
    {16, "iq2_xxs", 256, 66, true}, {17, "iq2_xs", 256, 74, true},
    {18, "iq3_xxs", 256, 98, true}, {19, "iq1_s", 256, 50, true},
    {20, "iq4_nl", 32, 18, true},  {21, "iq3_s", 256, 110, true},
    {22, "iq2_s", 256, 82, true},  {23, "iq4_xs", 256, 136, true},
    {24, "i8", 1, 1, false},       {25, "i16", 1, 2, false},
    {26, "i32", 1, 4, false},      {27, "i64", 1, 8, false},
    {28, "f64", 1, 8, false},      {29, "iq1_m", 256, 56, true},
    {30, "bf16", 1, 2, false},     {31, "q4_0_4_4", 0, 0, true},
    {32, "q4_0_4_8", 0, 0, true},  {33, "q4_0_8_8", 0, 0, true},
    {34, "tq1_0", 256, 54, true},  {35, "tq2_0", 256, 66, true},
    {36, "iq4_nl_4_4", 0, 0, true}, {37, "iq4_nl_4_8", 0, 0, true},
    {38, "iq4_nl_8_8", 0, 0, true}, {39, "mxfp4", 32, 17, true},
    {40, "nvfp4", 64, 36, true},   {41, "q1_0", 128, 18, true},
    {42, "q2_0", 64, 18, true},
}};

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

std::optional<TypeInfo> type_info(uint32_t id) {
  if (id >= kTypeCount) return std::nullopt;
  return kTable[id];
}

std::optional<Type> type_from_name(std::string_view name) {
  for (const TypeInfo& t : kTable) {
    if (t.block_size != 0 && iequal(t.name, name)) return static_cast<Type>(t.id);
  }
  return std::nullopt;
}

std::optional<uint64_t> row_bytes(Type t, uint64_t n) {
  auto info = type_info(t);
  if (!info || info->block_size == 0 || n % info->block_size != 0) return std::nullopt;
  return n / info->block_size * info->type_size;
}

double bits_per_weight(Type t) {
  auto info = type_info(t);
  if (!info || info->block_size == 0) return 0.0;
  return info->type_size * 8.0 / info->block_size;
}

}  // namespace strata::quant
