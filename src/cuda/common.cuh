// Shared by every CUDA file: the check macro that turns a failed CUDA call into a Status
// naming the statement, and warp helpers. Nothing here launches work.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "strata/common/status.h"

namespace strata::cuda {

// Defined in status.cpp (compiled by the host compiler: fmt's consteval format strings do
// not pass through nvcc, so .cu files build messages with std::string only).
Status cuda_status(cudaError_t err, const char* what, const char* file, int line);

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace strata::cuda

// Return a Status from the enclosing function when a CUDA runtime call fails.
#define STRATA_CUDA_TRY(call)                                                                  \
  do {                                                                                         \
    ::strata::Status strata_cuda_st_ = ::strata::cuda::cuda_status((call), #call, __FILE__, __LINE__); \
    if (!strata_cuda_st_.ok()) return strata_cuda_st_;                                         \
  } while (0)
