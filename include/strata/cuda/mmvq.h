// mmvq: y = W x for a decode window of T = 1..8 activation rows, W in any weight type of the
// published packs. Host-only header (no CUDA types); kernels in src/cuda/mmvq.cuh,
// mmvq_direct.cu, mmvq_mma.cu and mmvf.cu (mmvq.cu says which takes a call).
//
// Quantized W (Q2_0, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, Q4_K, Q5_K,
// Q6_K, Q4_0, Q5_0, Q5_1, Q8_0) takes q8_1 activations (cuda::quantize_q8_1); F32, F16 and BF16 W
// take f32 activations. Each weight block is decoded once per launch for all T rows. Results are
// deterministic (fixed summation order); their tolerance against the reference is in
// docs/PARITY.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/common/status.h"
#include "strata/quant/types.h"

struct CUstream_st;

namespace strata::cuda {

using Stream = CUstream_st*;  // cudaStream_t, without the CUDA headers

inline constexpr int kMaxWindowRows = 8;  // T of a decode/verify window ([TAG_WINDOW_ROWS])

bool mmvq_supports(quant::Type type);
// True for the types whose activations are q8_1 (false for F32/F16/BF16: f32 activations).
bool mmvq_takes_q8_1(quant::Type type);

struct MmvqArgs {
  quant::Type type = quant::Type::F32;
  const void* weights = nullptr;  // rows x cols, rows packed back to back; 16-byte aligned
  int64_t rows = 0;
  int64_t cols = 0;               // a positive multiple of 32 and of the type's block size
  const void* act = nullptr;      // T rows: q8_1 blocks (quantized W) or floats; 16-byte aligned
  int64_t act_stride = 0;         // bytes between activation rows; a multiple of 16
  int T = 1;                      // 1 .. kMaxWindowRows
  float* y = nullptr;             // T rows of `rows` floats
  int64_t y_stride = 0;           // floats between output rows, >= rows
};

// How a call is launched, for logs and the parity bench (the same choice mmvq() makes).
struct MmvqPlan {
  const char* kernel = "";  // e.g. "mmvq_decode_kernel"
  int threads = 0;          // per CTA
  int grid = 0;             // CTAs launched (persistent: each loops over row tiles)
  int ksplit = 1;           // warps of a CTA that share one row tile along K
  int rows_per_tile = 0;
  int ctas_per_sm = 0;      // occupancy at this shared-memory size
  size_t smem_bytes = 0;
};

Result<MmvqPlan> mmvq_plan(const MmvqArgs& args);

// Checks shapes and alignment, then launches on `stream`. Errors name the argument.
Status mmvq(const MmvqArgs& args, Stream stream = nullptr);

}  // namespace strata::cuda
