// Reference dequantization: ggml blocks -> binary32, bit-exact with ggml's reference
// dequantizers (spec/quant-formats.md §4). This is the "obviously right" path that every fast
// kernel (CPU SIMD, CUDA) is checked against, so it favours plain per-element formulas over speed.
#pragma once

#include <cstdint>

#include "strata/common/status.h"
#include "strata/quant/types.h"

namespace strata::quant {

// True for the types dequantize_row handles: F32, F16, BF16 and every block type of the spec
// (Q4_0 … Q2_0, the K-quants, Q8_K, the i-quants, TQ1_0/TQ2_0, MXFP4, NVFP4) plus Q8_1.
// False for the integer types, F64, removed ids and ids this build does not know.
bool has_dequantizer(Type type);

// Dequantizes n consecutive elements (n / block_size whole blocks, read back to back from src)
// into dst. Fails, naming the type, when the type has no dequantizer, n is negative or n is not
// a multiple of the block size. src needs no alignment.
Status dequantize_row(Type type, const void* src, float* dst, int64_t n);

}  // namespace strata::quant
