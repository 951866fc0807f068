// CUDA error to Status, with the statement and place that failed.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "strata/common/status.h"

namespace strata::cuda {

Status cuda_status(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return Status::ok_status();
  return Status::error(fmt::format("cuda: {} failed: {} ({}) at {}:{}", what, cudaGetErrorString(err),
                                   static_cast<int>(err), file, line));
}

}  // namespace strata::cuda
