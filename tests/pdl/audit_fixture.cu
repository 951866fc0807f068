// Kernels that tools/pdl_audit.py must judge: one that reads an activation before its wait (must be
// reported), one that reads only a tagged weight before it (must pass), one without a wait (must be
// reported). Compiled for sm_90 only, never launched.
#include <cuda_runtime.h>

__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// The load is written before the wait, as a kernel breaking the contract in the source would.
__global__ void fixture_reads_activation_early(const float* x, float* y) {
  const float v = x[threadIdx.x];
  grid_wait();
  y[threadIdx.x] = v;
}

__global__ void fixture_reads_weight_early(const float* w, const float* x, float* y) {
  const float v = w[threadIdx.x];  // pdl-pre-wait: weights (the tag the audit accepts)
  grid_wait();
  y[threadIdx.x] = v * x[threadIdx.x];
}

__global__ void fixture_never_waits(float* y) { y[threadIdx.x] = 1.0f; }
