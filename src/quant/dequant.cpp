// The one place that maps a Type to its block dequantizer (STYLE: one dispatch), plus the
// plain number types. Block formulas live in the dequant_*.cpp files by family.
#include "strata/quant/dequant.h"

#include <cstring>
#include <string>

#include "dequant_blocks.h"

namespace strata::quant {
namespace detail {
namespace {

void dequant_f32(const uint8_t* b, float* y) { std::memcpy(y, b, 4); }
void dequant_f16(const uint8_t* b, float* y) { *y = fp16_to_fp32(le16(b)); }
void dequant_bf16(const uint8_t* b, float* y) { *y = bf16_to_fp32(le16(b)); }

}  // namespace

// nullptr for types without a dequantizer. A switch over every enumerator (no default) lets the
// compiler flag a newly added Type that was forgotten here.
BlockDequantFn block_dequantizer(Type type) {
  switch (type) {
    case Type::F32: return dequant_f32;
    case Type::F16: return dequant_f16;
    case Type::BF16: return dequant_bf16;
    case Type::Q4_0: return dequant_q4_0;
    case Type::Q4_1: return dequant_q4_1;
    case Type::Q5_0: return dequant_q5_0;
    case Type::Q5_1: return dequant_q5_1;
    case Type::Q8_0: return dequant_q8_0;
    case Type::Q8_1: return dequant_q8_1;
    case Type::Q1_0: return dequant_q1_0;
    case Type::Q2_0: return dequant_q2_0;
    case Type::Q2_K: return dequant_q2_k;
    case Type::Q3_K: return dequant_q3_k;
    case Type::Q4_K: return dequant_q4_k;
    case Type::Q5_K: return dequant_q5_k;
    case Type::Q6_K: return dequant_q6_k;
    case Type::Q8_K: return dequant_q8_k;
    case Type::IQ2_XXS: return dequant_iq2_xxs;
    case Type::IQ2_XS: return dequant_iq2_xs;
    case Type::IQ2_S: return dequant_iq2_s;
    case Type::IQ3_XXS: return dequant_iq3_xxs;
    case Type::IQ3_S: return dequant_iq3_s;
    case Type::IQ1_S: return dequant_iq1_s;
    case Type::IQ1_M: return dequant_iq1_m;
    case Type::IQ4_NL: return dequant_iq4_nl;
    case Type::IQ4_XS: return dequant_iq4_xs;
    case Type::MXFP4: return dequant_mxfp4;
    case Type::NVFP4: return dequant_nvfp4;
    case Type::TQ1_0: return dequant_tq1_0;
    case Type::TQ2_0: return dequant_tq2_0;
    // Integer and f64 tensors are not weights of any supported model; the loader rejects them.
    case Type::I8:
    case Type::I16:
    case Type::I32:
    case Type::I64:
    case Type::F64: return nullptr;
  }
  return nullptr;  // an id outside the enumerators (cast from a file value)
}

}  // namespace detail

namespace {

std::string type_label(Type type) {
  auto info = type_info(type);
  const uint32_t id = static_cast<uint32_t>(type);
  if (!info) return "unknown type id " + std::to_string(id);
  return std::string(info->name) + " (id " + std::to_string(id) + ")";
}

}  // namespace

bool has_dequantizer(Type type) { return detail::block_dequantizer(type) != nullptr; }

Status dequantize_row(Type type, const void* src, float* dst, int64_t n) {
  const detail::BlockDequantFn fn = detail::block_dequantizer(type);
  if (fn == nullptr) return Status::error("quant: dequantize_row: no dequantizer for " + type_label(type));
  const TypeInfo info = *type_info(type);  // every type with a dequantizer has a table row
  if (n < 0 || n % info.block_size != 0) {
    return Status::error("quant: dequantize_row: " + type_label(type) + ": row length " + std::to_string(n) +
                         " is not a non-negative multiple of the block size " + std::to_string(info.block_size));
  }
  const auto* blocks = static_cast<const uint8_t*>(src);
  const int64_t n_blocks = n / info.block_size;
  for (int64_t i = 0; i < n_blocks; ++i) fn(blocks + i * info.type_size, dst + i * info.block_size);
  return Status::ok_status();
}

}  // namespace strata::quant
