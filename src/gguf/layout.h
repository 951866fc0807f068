// Private helpers shared by the reader and the writer: checked arithmetic and the size of a
// tensor from its type and shape. Every multiplication on file-supplied numbers goes through
// these, so a hostile file cannot wrap a size into something small that passes a bounds check.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "strata/common/status.h"
#include "strata/gguf/gguf.h"

namespace strata::gguf::detail {

inline bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }
inline bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }

inline bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// align_up for a power-of-two alignment; the caller keeps x far from UINT64_MAX (x is a file
// position or a checked size < 2^63).
inline uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) & ~(alignment - 1); }

struct TensorSize {
  uint64_t n_elements = 0;
  uint64_t nbytes = 0;
};

// Checks a tensor's type id and shape (n_dims <= 4, every ne >= 0, known and not removed type,
// ne[0] a multiple of the block size, element count and byte size below 2^63) and returns its
// size. Errors say what was wrong without the "gguf: FILE: tensor X:" prefix, which the caller adds.
Result<TensorSize> tensor_size(uint32_t type_id, std::span<const int64_t> ne);

// Tensor name rules (non-empty, < 64 bytes); returns an error detail or an empty string.
std::string check_tensor_name(std::string_view name);

// "general.alignment" must be a u32 power of two; returns an error detail or an empty string.
std::string check_alignment_value(const Value& v);

// Printable form of arbitrary bytes for messages and dumps: printable ASCII kept except '"'
// and '\\', everything else as \xNN.
std::string escape_bytes(std::string_view bytes);

// A key or tensor name as it appears in a message: escaped, and cut after 80 bytes so that
// a hostile 1 GiB name does not become a 1 GiB error message.
std::string item_name(std::string_view name);

}  // namespace strata::gguf::detail
