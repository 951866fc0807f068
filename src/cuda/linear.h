// y = W x for the T rows of a window, whatever W's type: quantized W takes the rows' q8_1 form,
// F32/F16/BF16 W the f32 rows (mmvq.h). An activation is quantized once and used by every
// weight that reads it (q, k, v and the indexer read the same u), so Act carries both forms.
// Host-only header.
#pragma once

#include <cstdint>

#include "dtensor.h"
#include "strata/common/status.h"
#include "strata/cuda/mmvq.h"

namespace strata::cuda {

// T rows of `cols` activations in device memory: f32 always, q8_1 once quantize_act ran.
struct Act {
  const float* f32 = nullptr;
  int64_t f32_stride = 0;        // floats between rows (a multiple of 4)
  void* q8 = nullptr;            // q8_1 blocks, row r at q8 + r * q8_stride
  int64_t q8_stride = 0;         // bytes (a multiple of 16, >= q8_1_row_bytes(cols))
  int64_t cols = 0;
  int T = 1;
};

// Bytes of one q8_1 row of `cols` values, rounded up to the 16 bytes mmvq wants.
inline int64_t q8_stride_for(int64_t cols) { return (cols / 32 * 36 + 15) / 16 * 16; }

// Fills act.q8 from act.f32 (needed before linear() with a quantized W).
Status quantize_act(const Act& act, Stream stream);

// y[t * y_stride + r] = sum_c W[r, c] x[t, c] for t < act.T, r < w.rows.
Status linear(const DTensor& w, const Act& act, float* y, int64_t y_stride, Stream stream);

}  // namespace strata::cuda
