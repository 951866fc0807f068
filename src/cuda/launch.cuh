// Kernel launches with programmatic dependent launch (PDL, sm_90+): a kernel of the decode
// sequence may start while the one before it drains, so its launch, its CTAs' set-up and the
// prefetch of its weights overlap the previous kernel's tail instead of following it.
//
// The contract every kernel launched with launch_kernel() keeps:
//   1. pdl_launch_dependents() early (the next kernel may then be scheduled), or last where the
//      next kernel has nothing to do before its wait and its early CTAs would only hold SMs that
//      another stream's kernels need (route_group_kernel);
//   2. only reads of data no kernel of the window writes (weights) before pdl_wait(), or of data
//      whose writer is known to have completed before the launch began (the grouping that the
//      routed experts' down call reads, moe_grouped.cuh: GroupedArgs::trigger_after_wait);
//   3. pdl_wait() before its first read of an activation or state and before its first write,
//      and on every thread before it exits (no early return ahead of the wait).
// pdl_wait() returns once every kernel before it in the stream has completed and its writes are
// visible, so a kernel that keeps the contract sees what it would see without PDL. Without the
// launch attribute (PDL off, or an older device) both calls are no-ops. That chain holds from one
// kernel to the next kernel of one stream only: a launch after a copy or memset goes without the
// attribute (pdl_full_dependency_next, launch.h); after a wait on another stream's kernel the wait
// covers that kernel too (launch.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "launch.h"

namespace strata::cuda {

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Pulls [p, p + bytes) toward L2 (one prefetch per 128-byte line, spread over the CTA's threads).
// For weights only: it runs before pdl_wait(), while the previous kernel may still be running.
__device__ __forceinline__ void prefetch_l2(const void* p, int64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const char* c = static_cast<const char*>(p);
  for (int64_t off = static_cast<int64_t>(threadIdx.x) * 128; off < bytes; off += static_cast<int64_t>(blockDim.x) * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(c + off));
#else
  (void)p;
  (void)bytes;
#endif
}

// prefetch_l2 by one warp: [p, p + bytes) from the 128-byte line that holds p, one line per lane.
__device__ __forceinline__ void prefetch_l2_warp(const void* p, int64_t bytes, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), first = a & ~uintptr_t{127};
  const int64_t span = static_cast<int64_t>(a - first) + bytes;
  for (int64_t off = static_cast<int64_t>(lane) * 128; off < span; off += 32 * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(first + off));
#else
  (void)p;
  (void)bytes;
  (void)lane;
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute when pdl_launch_allowed()
// (pdl_enabled() and no full dependency pending on the stream: launch.h), and
// as thread-block clusters of cluster_x CTAs along x when cluster_x > 0 (sm_90+). Returns the
// launch's error (as cudaGetLastError would).
template <class... Params, class... Args>
cudaError_t launch_kernel_clustered(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                    unsigned cluster_x, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster_x > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster_x;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl_launch_allowed(stream)) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  return launch_kernel_clustered(kernel, grid, block, smem, 0u, stream, std::forward<Args>(args)...);
}

}  // namespace strata::cuda
