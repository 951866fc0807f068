// Shared by every CUDA file: the check macro that turns a failed CUDA call into a Status
// naming the statement, and warp helpers. Nothing here launches work.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
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

// The sum of v over the full warp, every lane getting it: one redux.sync from sm_80, shuffles before.
__device__ __forceinline__ int warp_sum_int(int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_add_sync(0xffffffffu, v);
#else
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
#endif
}

// The two halves of the cluster barrier (PTX barrier.cluster), so that a CTA arrives early and
// waits only where it must, and CTAs with nothing left to do leave without waiting. The pattern
// of a cluster whose ranks push results into rank 0's shared memory:
//   phase 1: arrive (relaxed) at the start, wait before the first store into rank 0 (a CTA's
//            shared memory may be accessed only once that CTA has started);
//   phase 2: arrive (release) after the stores; only rank 0 waits (acquire) and reads them.
// No-ops below sm_90 (no clusters there).
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_arrive_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait_acquire() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

// Pushing values into another CTA's shared memory of the cluster without the release half of a
// cluster barrier (sm_90). The receiving CTA (rank 0 of a reduction; every rank of an exchange)
// arms an mbarrier with the bytes it will receive before its phase-1 arrive (cluster_push_init);
// a sender, after its phase-1 wait, stores with st.async, each store counting its bytes on that
// mbarrier (cluster_push), and may leave at once; the receiver waits for the count
// (cluster_push_wait). The complete_tx of st.async releases the store at cluster scope, so no
// fence is needed behind the stores, where the release arrive (barrier.cluster.arrive.release)
// waited for every earlier memory operation of the CTA. A receiver leaves only after every push
// into it has landed, so no sender writes into a CTA that has exited.
// `bar` is the receiver's mbarrier, one 8-byte word of its shared memory used for one launch.
__device__ __forceinline__ void cluster_push_init(uint64_t* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
// The shared::cluster address of `p` (this CTA's shared memory) in rank `rank`'s.
__device__ __forceinline__ unsigned cluster_rank_addr(const void* p, unsigned rank) {
  unsigned r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))), "r"(rank));
#endif
  return r;
}
// One float into another rank's shared memory (dst, bar: cluster_rank_addr's), counted on bar.
__device__ __forceinline__ void cluster_push(unsigned dst, float v, unsigned bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(dst), "r"(__float_as_uint(v)),
               "r"(bar)
               : "memory");
#endif
}
// The receiver: until every byte cluster_push_init announced has arrived; then the stores are visible.
__device__ __forceinline__ void cluster_push_wait(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], 0;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(b)
      : "memory");
#endif
}

// torch's forms of the activations, as include/strata/reference/ops.h.
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
// silu as torch's CPU kernel computes it (reference::silu), every rounding spelled out: the MoE's
// SwiGLU kernels (moe.cu, moe_direct.cu) must agree to the bit.
__device__ __forceinline__ float silu_rn(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }
// h = silu(g) * u for 4 values.
__device__ __forceinline__ float4 swiglu4(const float4 g, const float4 u) {
  return make_float4(__fmul_rn(silu_rn(g.x), u.x), __fmul_rn(silu_rn(g.y), u.y), __fmul_rn(silu_rn(g.z), u.z),
                     __fmul_rn(silu_rn(g.w), u.w));
}

// reference inv_rms: mean in double rounded to float, then 1 / sqrt(mean + eps) in float.
__device__ __forceinline__ float inv_rms(double sum_sq, int n, float eps) {
  const float mean = static_cast<float>(sum_sq / static_cast<double>(n));
  return 1.0f / sqrtf(mean + eps);
}

// ---- CTA-wide sum and scan in a fixed order ------------------------------------------------------
// The CTA-wide sum of one double per thread (kThreads threads): a fixed shuffle tree per warp,
// then the warps' partials in warp order, so the result depends only on the inputs and kThreads.
// `partial` is kThreads / 32 doubles of shared memory; the closing sync lets the caller's next sum
// reuse it.
template <int kThreads>
__device__ double block_sum_synced(double v, double* partial) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  __syncthreads();  // `partial` may be reused by the next sum
  return total;
}

// Exclusive prefix sum of one int per thread over the CTA, in thread order; total = the sum.
// warp_tot: one int per warp of shared memory, reusable by the next scan.
__device__ inline int block_exclusive_scan(int v, int* warp_tot, int& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  int incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += n;
  }
  if (lane == 31) warp_tot[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int w = lane < nwarps ? warp_tot[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    if (lane < nwarps) warp_tot[lane] = w;
  }
  __syncthreads();
  const int before = warp > 0 ? warp_tot[warp - 1] : 0;
  total = warp_tot[nwarps - 1];
  __syncthreads();  // warp_tot is reused by the next scan
  return before + incl - v;
}

// ---- asynchronous global -> shared copies (sm_80+; a synchronous fallback before) -------------
// 16 bytes from a 16-byte aligned global address to a 16-byte aligned shared address; bytes past
// `src_bytes` (0..16) are zero-filled and never read, so a copy can stop exactly at a tensor's end.
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src, int src_bytes) {
#if __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes) : "memory");
#else
  if (src_bytes == 16) {
    *static_cast<uint4*>(smem_dst) = *static_cast<const uint4*>(gmem_src);
  } else {
    for (int i = 0; i < 16; ++i)
      static_cast<unsigned char*>(smem_dst)[i] = i < src_bytes ? static_cast<const unsigned char*>(gmem_src)[i] : 0;
  }
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// ---- int8 tensor-core tile: C(16x8, s32) += A(16x32, s8) * B(32x8, s8) ---------------------
// PTX fragment layout (lane = 4 * g + q, g = lane / 4, q = lane % 4), 4 int8 per register:
//   a0: row g,   k 4q..4q+3      a1: row g+8, k 4q..4q+3
//   a2: row g,   k 16+4q..+3     a3: row g+8, k 16+4q..+3
//   b0: col g,   k 4q..4q+3      b1: col g,   k 16+4q..+3
//   c0, c1: row g, cols 2q, 2q+1     c2, c3: row g+8, cols 2q, 2q+1
// The k order inside one product is free as long as A and B agree on it. Turing (sm_75) has no
// m16n8k32 and runs four m8n8k16 with the same register meaning. Integer sums are exact, so the
// two paths give identical results.
__device__ __forceinline__ void mma_s8_16x8x32(int (&c)[4], const int (&a)[4], const int (&b)[2]) {
#if __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif __CUDA_ARCH__ >= 750
  asm("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};"
      : "+r"(c[0]), "+r"(c[1]) : "r"(a[0]), "r"(b[0]));
  asm("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};"
      : "+r"(c[2]), "+r"(c[3]) : "r"(a[1]), "r"(b[0]));
  asm("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};"
      : "+r"(c[0]), "+r"(c[1]) : "r"(a[2]), "r"(b[1]));
  asm("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};"
      : "+r"(c[2]), "+r"(c[3]) : "r"(a[3]), "r"(b[1]));
#else
  // No int8 tensor cores before Turing; launchers refuse such devices (kMinComputeCapability).
  (void)c; (void)a; (void)b;
  __trap();
#endif
}

}  // namespace strata::cuda

// Return a Status from the enclosing function when a CUDA runtime call fails.
#define STRATA_CUDA_TRY(call)                                                                  \
  do {                                                                                         \
    ::strata::Status strata_cuda_st_ = ::strata::cuda::cuda_status((call), #call, __FILE__, __LINE__); \
    if (!strata_cuda_st_.ok()) return strata_cuda_st_;                                         \
  } while (0)
