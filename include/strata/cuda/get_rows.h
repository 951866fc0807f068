// get_rows: gather rows of a weight-format tensor and dequantize them to f32 on the GPU (the token
// embedding and the n-gram table rows). Bit-exact with quant::dequantize_row for every type it
// takes (spec quant-formats.md §6; `strata parity` checks it with memcmp). Host-only header.
#pragma once

#include <cstdint>

#include "strata/common/status.h"
#include "strata/quant/types.h"

struct CUstream_st;

namespace strata::cuda {

using Stream = CUstream_st*;  // cudaStream_t, without the CUDA headers

// The mmvq weight types (Q2_0, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS,
// Q4_K, Q5_K, Q6_K, Q4_0, Q5_0, Q5_1, Q8_0) plus F32, F16 and BF16.
bool get_rows_supports(quant::Type type);

struct GetRowsArgs {
  quant::Type type = quant::Type::F32;
  const void* src = nullptr;      // src_rows rows of `cols` elements, rows packed back to back
  int64_t src_rows = 0;
  int64_t cols = 0;               // a multiple of 32 and of the type's block size
  const int32_t* ids = nullptr;   // device array of n_ids row indices
  int64_t n_ids = 0;
  float* dst = nullptr;           // n_ids rows of `cols` floats, dst + i * dst_stride
  int64_t dst_stride = 0;         // floats; a multiple of 4, >= cols; dst 16-byte aligned
};

// dst row i = dequantize(src row ids[i]). An id outside [0, src_rows) writes a row of NaN rather
// than reading out of bounds. src needs 2-byte alignment (4 for F32).
Status get_rows(const GetRowsArgs& args, Stream stream = nullptr);

}  // namespace strata::cuda
