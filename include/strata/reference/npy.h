// A minimal .npy writer (NumPy format version 1.0, little-endian float32, C order), enough
// for `strata run --logits-out` and test dumps to be read with numpy.load.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "strata/common/status.h"

namespace strata::reference {

// Writes data as a [rows, cols] float32 array. data.size() must equal rows * cols.
Status write_npy_f32(const std::string& path, std::span<const float> data, int64_t rows, int64_t cols);

}  // namespace strata::reference
