// The q8_1 activation quantizer on the GPU: f32 rows -> 36-byte q8_1 blocks (spec
// quant-formats.md §5.2), the activation format of every mmvq weight type.
//
// Rounding rule [TAG_Q8_1_RULE]: the *scalar reference's* (quant::quantize_row_q8_1), not
// ggml-CUDA's. Per block of 32: d = amax / 127, id = d ? 1 / d : 0, q = roundf(x * id) (ties away
// from zero), d stored as f16 (nearest-even), s = f16(sum(q) * d) with the unrounded d. The output
// is therefore byte-identical to the CPU reference for every finite input (`strata parity` checks
// it with memcmp), so CPU and GPU paths see the same activations. ggml-CUDA instead computes
// q = roundf(x / d) and s = f16(sum(x)), which can differ by one code at ties and in s.
// Host-only header: no CUDA types.
#pragma once

#include <cstdint>

#include "strata/common/status.h"

struct CUstream_st;

namespace strata::cuda {

using Stream = CUstream_st*;  // cudaStream_t, without the CUDA headers

inline constexpr int64_t kQ8_1BlockBytes = 36;
inline constexpr int64_t q8_1_row_bytes(int64_t cols) { return cols / 32 * kQ8_1BlockBytes; }

// Quantizes `rows` rows of `cols` floats (x + r * x_stride floats) into q8_1 blocks at
// dst + r * dst_stride bytes. cols must be a positive multiple of 32; x and dst 16-byte aligned,
// x_stride a multiple of 4 floats, dst_stride a multiple of 4 bytes and >= q8_1_row_bytes(cols).
Status quantize_q8_1(const float* x, int64_t x_stride, int64_t cols, int64_t rows, void* dst, int64_t dst_stride,
                     Stream stream = nullptr);

}  // namespace strata::cuda
