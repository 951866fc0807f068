// The top-k order of the MoE router (reference::top_k over reference::route's probabilities) as
// the device kernels that pick experts share it: router_topk_kernel (moe.cu) and
// route_group_kernel (moe_grouped.cu).
#pragma once

namespace strata::cuda {

// a before b: probability descending, ties to the lower id.
__device__ __forceinline__ bool ranks_before(float pa, int ia, float pb, int ib) {
  return pa > pb || (pa == pb && ia < ib);
}

// The warp's first (v, i) under ranks_before, from each lane's own candidate, by a fixed xor
// butterfly. ranks_before is a total order on distinct ids, so every lane ends with the same pair.
__device__ __forceinline__ void warp_rank_first(float& v, int& i) {
  for (int s = 16; s > 0; s >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, s);
    const int oi = __shfl_xor_sync(0xffffffffu, i, s);
    if (ranks_before(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
}

}  // namespace strata::cuda
