// The ggml element types: one table with id, name, elements per block and bytes per block
// (spec/quant-formats.md §2). Ids are stable file-format values; removed ids stay in the
// table with block_size 0 so a reader can name them when it rejects them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace strata::quant {

enum class Type : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

// One past the largest id this build knows (GGML_TYPE_COUNT at the spec's revision).
inline constexpr uint32_t kTypeCount = 43;

struct TypeInfo {
  uint32_t id;
  std::string_view name;     // ggml_type_name, e.g. "q4_K", "iq2_xxs"
  uint32_t block_size;       // elements per block; 0 for removed ids
  uint32_t type_size;        // bytes per block; 0 for removed ids
  bool quantized;            // a block format (not a plain number type)
};

// Table row for an id, or nullopt for an id >= kTypeCount. Removed ids return a row with
// block_size 0: callers that read tensors must reject those.
std::optional<TypeInfo> type_info(uint32_t id);
inline std::optional<TypeInfo> type_info(Type t) { return type_info(static_cast<uint32_t>(t)); }

// Id for a name as ggml spells it (case-insensitive: "Q4_K" and "q4_k" both match).
std::optional<Type> type_from_name(std::string_view name);

// Bytes of one row of n elements; nullopt when n is not a multiple of the block size
// or the type is unknown/removed.
std::optional<uint64_t> row_bytes(Type t, uint64_t n);

// Bits per weight (type_size * 8 / block_size).
double bits_per_weight(Type t);

// True for the weight types whose engine mat-vec takes its activations in q8_1 (each row of x
// quantized per 32 values, quantize_row_q8_1's bytes) rather than f32: the types with a CUDA
// mmvq kernel. F32, F16 and BF16 weights take f32 activations; so do the types without an
// engine kernel (Q4_1, the K types Q2_K/Q3_K, TQ*, MXFP4, NVFP4, Q1_0...), which the engine
// refuses to load. Every type here has a block size that is a multiple of 32, so its rows are
// whole q8_1 blocks. cuda::mmvq_takes_q8_1 is this function (src/cuda/mmvq.cu checks at compile
// time that its kernel list names exactly these types), and the reference's engine activation
// numerics mode (reference/matmul.h) rounds the activations of exactly these types.
constexpr bool takes_q8_1_activations(Type t) {
  switch (t) {
    case Type::Q4_0: case Type::Q5_0: case Type::Q5_1: case Type::Q8_0: case Type::IQ4_NL: case Type::Q2_0:
    case Type::Q4_K: case Type::Q5_K: case Type::Q6_K: case Type::IQ2_XXS: case Type::IQ2_XS: case Type::IQ2_S:
    case Type::IQ3_XXS: case Type::IQ3_S: case Type::IQ1_M: case Type::IQ4_XS:
      return true;
    default:
      return false;
  }
}

// How many type ids takes_q8_1_activations accepts (for the compile-time check in mmvq.cu).
constexpr int count_q8_1_activation_types() {
  int n = 0;
  for (uint32_t id = 0; id < kTypeCount; ++id) n += takes_q8_1_activations(static_cast<Type>(id)) ? 1 : 0;
  return n;
}

}  // namespace strata::quant
