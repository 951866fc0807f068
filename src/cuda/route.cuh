// The MoE router's softmax (reference::softmax) and top-k order (reference::top_k over
// reference::route's probabilities) as the device kernels that pick experts share them:
// router_topk_kernel (moe.cu) and route_group_kernel (moe_grouped.cu).
#pragma once

#include <cmath>

#include "float_key.h"
#include "moe.h"  // kRouterLaneSlots, kRouterMaxExperts

namespace strata::cuda {

// reference::softmax of one row of n <= kRouterMaxExperts values held by a warp: v holds this
// lane's logits on entry and its probabilities on return. The max; expf of the difference; the
// sum in double, per lane in slot order and then by a fixed xor butterfly, so the bits do not
// depend on timing; p = e / float(sum). Slots past n stay out of the max and the sum and hold
// nothing meaningful on return (their exps are formed anyway, so that all the exps overlap
// instead of each waiting on a guard).
__device__ __forceinline__ void warp_softmax(float (&v)[kRouterLaneSlots], int n, int lane) {
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < kRouterLaneSlots; ++j)
    if (lane + 32 * j < n) mx = fmaxf(mx, v[j]);
  for (int s = 16; s > 0; s >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, s));
#pragma unroll
  for (int j = 0; j < kRouterLaneSlots; ++j) v[j] = expf(__fsub_rn(v[j], mx));
  double sum = 0.0;
#pragma unroll
  for (int j = 0; j < kRouterLaneSlots; ++j)
    if (lane + 32 * j < n) sum += static_cast<double>(v[j]);
  for (int s = 16; s > 0; s >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, s);
  const float total = static_cast<float>(sum);
#pragma unroll
  for (int j = 0; j < kRouterLaneSlots; ++j) v[j] = __fdiv_rn(v[j], total);
}

// a before b: probability descending, ties to the lower id.
__device__ __forceinline__ bool ranks_before(float pa, int ia, float pb, int ib) {
  return pa > pb || (pa == pb && ia < ib);
}

// The warp's first (v, i) under ranks_before, from each lane's own candidate (v never NaN or -0:
// the candidates ranked here are probabilities, -1 for NaN and -inf). ranks_before is a total
// order on distinct ids, so every lane ends with the same pair. On sm_80 and newer by two warp
// reductions: the largest float_key of v, then the lowest id among the lanes holding it (the
// round is the step's critical path k times per MoE block); before, by a fixed xor butterfly.
__device__ __forceinline__ void warp_rank_first(float& v, int& i) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned key = float_key(v);
  const unsigned top = __reduce_max_sync(0xffffffffu, key);
  i = __reduce_min_sync(0xffffffffu, key == top ? i : 0x7FFFFFFF);
  v = float_of_key(top);
#else
  for (int s = 16; s > 0; s >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, s);
    const int oi = __shfl_xor_sync(0xffffffffu, i, s);
    if (ranks_before(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
#endif
}

}  // namespace strata::cuda
