// The MoE's small kernels (moe.h): the router's softmax + top-k, the shared expert's SwiGLU (with
// its optional q8_1 form) and its scalar sigmoid gate. The grouped routed experts are in
// moe_grouped.cu. Every float operation the reference rounds on its own is spelled with an _rn
// intrinsic, so no contraction changes the order of evaluation. Every kernel is launched with PDL
// (launch.cuh) and waits for its predecessor before touching any activation; none reads weights.
#include "moe.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "common.cuh"
#include "launch.cuh"
#include "q8_1.cuh"
#include "route.cuh"

namespace strata::cuda {
namespace {

// ---- router ----------------------------------------------------------------------------------

// One warp per window row: route.cuh's warp_softmax over the row in registers, then k rounds of
// a warp-wide argmax under ranks_before (each round removes its winner), then the weights
// p_e / sum with the sum taken in selection order as reference::route does.
__global__ void __launch_bounds__(32) router_topk_kernel(const float* __restrict__ logits, int n, int k,
                                                         int32_t* __restrict__ ids, float* __restrict__ weights) {
  __shared__ float prob[kRouterMaxExperts];  // [n] softmax probabilities
  __shared__ float work[kRouterMaxExperts];  // [n] probabilities still in the race (-inf once taken)
  pdl_launch_dependents();
  pdl_wait();
  const int t = blockIdx.x, lane = threadIdx.x;
  const float* x = logits + static_cast<int64_t>(t) * n;

  float p[kRouterLaneSlots];
#pragma unroll
  for (int j = 0; j < kRouterLaneSlots; ++j) p[j] = lane + 32 * j < n ? x[lane + 32 * j] : 0.0f;
  warp_softmax(p, n, lane);
#pragma unroll
  for (int j = 0; j < kRouterLaneSlots; ++j)
    if (lane + 32 * j < n) prob[lane + 32 * j] = work[lane + 32 * j] = p[j];
  __syncwarp();

  float selected_sum = 0.0f;  // lane 0 only: the reference's float sum in selection order
  for (int r = 0; r < k; ++r) {
    float bp = -INFINITY;
    int bi = n;  // "none": loses every comparison against a real candidate of equal value
    for (int e = lane; e < n; e += 32) {
      const float v = work[e];
      if (ranks_before(v, e, bp, bi)) {
        bp = v;
        bi = e;
      }
    }
    warp_rank_first(bp, bi);
    const int id = bi < n ? bi : 0;  // only NaN logits leave no candidate
    if (lane == 0) {
      ids[static_cast<int64_t>(t) * k + r] = id;
      selected_sum = __fadd_rn(selected_sum, prob[id]);
    }
    if (lane == (id & 31)) work[id] = -INFINITY;
    __syncwarp();
  }
  if (lane == 0) {
    for (int r = 0; r < k; ++r) {
      const int64_t o = static_cast<int64_t>(t) * k + r;
      weights[o] = __fdiv_rn(prob[ids[o]], selected_sum);
    }
  }
}

// ---- SwiGLU and the shared gate ------------------------------------------------------------------

constexpr int kEwThreads = 256;  // elementwise kernels: 4 values per thread

// Row blockIdx.y, values 4 * (blockIdx.x * kEwThreads + threadIdx.x) .. + 3. When q8 != nullptr
// (n a multiple of 32) the same lanes quantize h: their 8-lane groups are its q8_1 blocks.
__global__ void __launch_bounds__(kEwThreads) swiglu_kernel(const float* __restrict__ g, const float* __restrict__ u,
                                                            int64_t stride, int n, float* __restrict__ h,
                                                            uint8_t* __restrict__ q8, int64_t q8_stride) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t t = blockIdx.y;
  const int quad = blockIdx.x * kEwThreads + threadIdx.x;
  const bool live = 4 * quad < n;
  float4 hv = make_float4(0.f, 0.f, 0.f, 0.f);
  if (live) {
    const float4 gv = *reinterpret_cast<const float4*>(g + t * stride + 4 * quad);
    const float4 uv = *reinterpret_cast<const float4*>(u + t * stride + 4 * quad);
    hv = swiglu4(gv, uv);
    *reinterpret_cast<float4*>(h + t * n + 4 * quad) = hv;
  }
  if (q8 != nullptr) quantize_q8_1_quad(hv, live, q8 + t * q8_stride, quad >> 3, quad & 7);
}

// The grouped call's entries: entry blockIdx.y (if it is one of the call's), values 4 * quad ..
// + 3 of its gate (row of 2n: gate then up). The same body as swiglu_kernel. Its operands are not
// __restrict__: ptxas moved the read-only (ld.global.nc) load of *n_groups above pdl_wait(), where
// the grouping kernel may not have written it yet (tools/pdl_audit.py checks every kernel for this).
__global__ void __launch_bounds__(kEwThreads) swiglu_entries_kernel(const float* gu, int n, const int* n_groups,
                                                                    const int* group_start,
                                                                    float* __restrict__ h, uint8_t* __restrict__ q8,
                                                                    int64_t q8_stride) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = blockIdx.y;
  if (i >= group_start[*n_groups]) return;  // CTA-uniform: not an entry of this call
  const int quad = blockIdx.x * kEwThreads + threadIdx.x;
  const bool live = 4 * quad < n;
  float4 hv = make_float4(0.f, 0.f, 0.f, 0.f);
  if (live) {
    const float4 gv = *reinterpret_cast<const float4*>(gu + i * 2 * n + 4 * quad);
    const float4 uv = *reinterpret_cast<const float4*>(gu + i * 2 * n + n + 4 * quad);
    hv = swiglu4(gv, uv);
    *reinterpret_cast<float4*>(h + i * n + 4 * quad) = hv;
  }
  if (q8 != nullptr) quantize_q8_1_quad(hv, live, q8 + i * q8_stride, quad >> 3, quad & 7);
}

__global__ void __launch_bounds__(kEwThreads) shared_gate_add_kernel(float* __restrict__ y, const float* __restrict__ s,
                                                                     const float* __restrict__ gate_logit,
                                                                     int64_t gate_stride, int n) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t t = blockIdx.y;
  const int j = blockIdx.x * kEwThreads + threadIdx.x;
  if (j >= n) return;
  const float gate = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-gate_logit[t * gate_stride])));  // reference::sigmoid
  y[t * n + j] = __fadd_rn(y[t * n + j], __fmul_rn(s[t * n + j], gate));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

Status router_topk(const float* logits, int T, int n_expert, int k, int32_t* ids, float* weights, Stream stream) {
  const std::string where = "cuda: router_topk(T=" + std::to_string(T) + ", n_expert=" + std::to_string(n_expert) +
                            ", k=" + std::to_string(k) + "): ";
  if (logits == nullptr || ids == nullptr || weights == nullptr) return Status::error(where + "null logits, ids or weights");
  if (T < 1 || T > 65535) return Status::error(where + "T must be in 1..65535");
  if (n_expert < 1 || n_expert > kRouterMaxExperts)
    return Status::error(where + "n_expert must be in 1.." + std::to_string(kRouterMaxExperts) + " (the router keeps a row in registers, " +
                         std::to_string(kRouterLaneSlots) + " experts per lane)");
  if (k < 1 || k > n_expert) return Status::error(where + "k must be in 1..n_expert");
  STRATA_CUDA_TRY(launch_kernel(router_topk_kernel, dim3(T), dim3(32), 0, stream, logits, n_expert, k, ids, weights));
  return Status::ok_status();
}

Status swiglu(const float* g, const float* u, int64_t stride, int T, int n, float* h, void* h_q8, int64_t q8_stride,
              Stream stream) {
  const std::string where = "cuda: swiglu(T=" + std::to_string(T) + ", n=" + std::to_string(n) + "): ";
  if (g == nullptr || u == nullptr || h == nullptr) return Status::error(where + "null g, u or h");
  if (T < 1 || T > 65535) return Status::error(where + "T must be in 1..65535");
  if (n < 4 || n % 4 != 0) return Status::error(where + "n must be a positive multiple of 4");
  if (!aligned16(g) || !aligned16(u) || !aligned16(h) || stride % 4 != 0 || stride < n)
    return Status::error(where + "g, u and h must be 16-byte aligned and stride (" + std::to_string(stride) +
                         ") a multiple of 4 floats >= n");
  if (h_q8 != nullptr) {
    if (n % 32 != 0) return Status::error(where + "n must be a multiple of 32 for the q8_1 form");
    if (reinterpret_cast<uintptr_t>(h_q8) % 4 != 0 || q8_stride % 4 != 0 || q8_stride < n / 32 * 36)
      return Status::error(where + "h_q8 must be 4-byte aligned and q8_stride (" + std::to_string(q8_stride) +
                           ") a multiple of 4 bytes >= " + std::to_string(n / 32 * 36));
  }
  const dim3 grid(static_cast<unsigned>((n / 4 + kEwThreads - 1) / kEwThreads), static_cast<unsigned>(T));
  STRATA_CUDA_TRY(launch_kernel(swiglu_kernel, grid, dim3(kEwThreads), 0, stream, g, u, stride, n, h,
                                static_cast<uint8_t*>(h_q8), q8_stride));
  return Status::ok_status();
}

Status swiglu_entries(const float* gu, int cap, int n, const int* n_groups, const int* group_start, float* h,
                      void* h_q8, int64_t q8_stride, Stream stream) {
  const std::string where = "cuda: swiglu_entries(cap=" + std::to_string(cap) + ", n=" + std::to_string(n) + "): ";
  if (gu == nullptr || n_groups == nullptr || group_start == nullptr || h == nullptr)
    return Status::error(where + "null gu, n_groups, group_start or h");
  if (cap < 1 || cap > 65535) return Status::error(where + "cap must be in 1..65535");
  if (n < 4 || n % 4 != 0) return Status::error(where + "n must be a positive multiple of 4");
  if (!aligned16(gu) || !aligned16(h)) return Status::error(where + "gu and h must be 16-byte aligned");
  if (h_q8 != nullptr) {
    if (n % 32 != 0) return Status::error(where + "n must be a multiple of 32 for the q8_1 form");
    if (reinterpret_cast<uintptr_t>(h_q8) % 4 != 0 || q8_stride % 4 != 0 || q8_stride < n / 32 * 36)
      return Status::error(where + "h_q8 must be 4-byte aligned and q8_stride (" + std::to_string(q8_stride) +
                           ") a multiple of 4 bytes >= " + std::to_string(n / 32 * 36));
  }
  const dim3 grid(static_cast<unsigned>((n / 4 + kEwThreads - 1) / kEwThreads), static_cast<unsigned>(cap));
  STRATA_CUDA_TRY(launch_kernel(swiglu_entries_kernel, grid, dim3(kEwThreads), 0, stream, gu, n, n_groups, group_start, h,
                                static_cast<uint8_t*>(h_q8), q8_stride));
  return Status::ok_status();
}

Status shared_gate_add(float* y, const float* s, const float* gate_logit, int T, int n, Stream stream) {
  return shared_gate_add(y, s, gate_logit, 1, T, n, stream);
}

Status shared_gate_add(float* y, const float* s, const float* gate_logit, int64_t gate_stride, int T, int n,
                       Stream stream) {
  const std::string where = "cuda: shared_gate_add(T=" + std::to_string(T) + ", n=" + std::to_string(n) + "): ";
  if (y == nullptr || s == nullptr || gate_logit == nullptr) return Status::error(where + "null y, s or gate_logit");
  if (T < 1 || T > 65535) return Status::error(where + "T must be in 1..65535");
  if (n < 1) return Status::error(where + "n must be positive");
  if (gate_stride < 1) return Status::error(where + "gate_stride must be positive");
  const dim3 grid(static_cast<unsigned>((n + kEwThreads - 1) / kEwThreads), static_cast<unsigned>(T));
  STRATA_CUDA_TRY(launch_kernel(shared_gate_add_kernel, grid, dim3(kEwThreads), 0, stream, y, s, gate_logit, gate_stride, n));
  return Status::ok_status();
}

}  // namespace strata::cuda
