// Shape, size and name rules of GGUF tensors (spec/quant-formats.md §1.7-§1.8), shared by the
// reader (which rejects) and the writer (which refuses to produce) the same bad cases.
#include "layout.h"

#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "strata/quant/types.h"

namespace strata::gguf::detail {

namespace {
constexpr uint64_t kMaxSigned = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}  // namespace

Result<TensorSize> tensor_size(uint32_t type_id, std::span<const int64_t> ne) {
  if (ne.size() > kMaxDims) {
    return Status::error(fmt::format("n_dims {} (expected at most {})", ne.size(), kMaxDims));
  }
  auto info = quant::type_info(type_id);
  if (!info) {
    return Status::error(fmt::format("unknown type id {} (expected < {})", type_id, quant::kTypeCount));
  }
  if (info->block_size == 0) {
    return Status::error(fmt::format("type id {} ({}) was removed from GGUF", type_id, info->name));
  }
  uint64_t dims[kMaxDims] = {1, 1, 1, 1};
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] < 0) return Status::error(fmt::format("ne[{}] is negative ({})", i, ne[i]));
    dims[i] = static_cast<uint64_t>(ne[i]);
  }
  if (dims[0] % info->block_size != 0) {
    return Status::error(fmt::format("ne[0] = {} is not a multiple of the {} block size {}", dims[0],
                                     info->name, info->block_size));
  }
  // Elements: ggml keeps them in int64, so the product must stay below 2^63.
  TensorSize size;
  size.n_elements = 1;
  for (uint64_t d : dims) {
    if (mul_overflows(size.n_elements, d, &size.n_elements) || size.n_elements > kMaxSigned) {
      return Status::error(fmt::format("element count of ne [{}, {}, {}, {}] overflows int64", dims[0],
                                       dims[1], dims[2], dims[3]));
    }
  }
  // Rows on their own: with ne[0] == 0 the element count is 0 whatever ne[1..3] say, but
  // TensorInfo::n_rows() multiplies them.
  uint64_t rows = 1;
  for (int i = 1; i < 4; ++i) {
    if (mul_overflows(rows, dims[i], &rows) || rows > kMaxSigned) {
      return Status::error(fmt::format("row count of ne [{}, {}, {}, {}] overflows int64", dims[0], dims[1],
                                       dims[2], dims[3]));
    }
  }
  // Bytes: whole rows of blocks. Elements < 2^63 and type_size/block_size <= 8 can still wrap
  // for 1-element blocks of 8 bytes, so check this product too.
  uint64_t bytes = dims[0] / info->block_size;
  bool overflow = mul_overflows(bytes, info->type_size, &bytes);
  for (int i = 1; i < 4 && !overflow; ++i) overflow = mul_overflows(bytes, dims[i], &bytes);
  if (overflow || bytes > kMaxSigned) {
    return Status::error(fmt::format("byte size of {} ne [{}, {}, {}, {}] overflows", info->name, dims[0],
                                     dims[1], dims[2], dims[3]));
  }
  size.nbytes = bytes;
  return size;
}

std::string check_tensor_name(std::string_view name) {
  if (name.empty()) return "empty tensor name";
  if (name.size() > kMaxTensorName) {
    return fmt::format("name is {} bytes (expected at most {})", name.size(), kMaxTensorName);
  }
  return {};
}

std::string check_alignment_value(const Value& v) {
  if (v.type() != ValueType::U32) {
    return fmt::format("expected u32, got {}", value_type_name(v.type()));
  }
  uint32_t a = v.as<uint32_t>();
  if (!is_power_of_two(a)) return fmt::format("value {} is not a power of two (expected a u32 power of two)", a);
  return {};
}

std::string escape_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

std::string item_name(std::string_view name) {
  constexpr size_t kMax = 80;
  if (name.size() <= kMax) return escape_bytes(name);
  return fmt::format("{}...({} bytes)", escape_bytes(name.substr(0, kMax)), name.size());
}

}  // namespace strata::gguf::detail
