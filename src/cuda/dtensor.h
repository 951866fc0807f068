// A weight tensor resident in device memory, as the kernels see it: type, shape and a device
// pointer. Rows are packed back to back (GGUF order); a 3-D expert tensor is expert-major, so
// expert e's matrix is rows [e * n_out, (e + 1) * n_out). Host-only header (no CUDA types).
#pragma once

#include <cstdint>

#include "strata/quant/types.h"

namespace strata::cuda {

struct DTensor {
  quant::Type type = quant::Type::F32;
  const void* data = nullptr;   // device memory, 256-byte aligned
  int64_t rows = 0;             // all rows (n_expert * n_out for expert tensors)
  int64_t cols = 0;             // row length in elements (ggml ne[0])
  int64_t row_bytes = 0;

  explicit operator bool() const { return data != nullptr; }
  // Rows [first, first + n) as their own tensor (one expert's matrix).
  DTensor slice_rows(int64_t first, int64_t n) const {
    DTensor t = *this;
    t.data = static_cast<const uint8_t*>(data) + first * row_bytes;
    t.rows = n;
    return t;
  }
  const float* f32() const { return static_cast<const float*>(data); }  // for F32 tensors only
};

}  // namespace strata::cuda
