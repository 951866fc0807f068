// The routed sum of one column, shared by combine_kernel (moe_grouped.cu) and the down call's
// tail (moe_direct.cu), so both forms give the same bits.
//
// y[t, j] = sum over row t's entries in ascending expert id of out[entry, j] * weight, from 0 and
// rounded step by step as the reference's `dst[j] += out * w`. With s != nullptr, then
// + s[t, j] * sigmoid(gate_logit[t * gate_stride]) rounded as one more addition: the reference adds
// the gated shared output (s * gate, rounded) to the finished routed sum. With wide.out set, the
// wide residual's S streams of column j then take + y * alpha as hc_combine_kernel rounds it.
#pragma once

#include <cstdint>

#include "moe.h"

namespace strata::cuda::moe_detail {

struct RoutedSum {
  const float* out;  // [entries, H]: each entry's down output (read through L2: see below)
  int H, k;
  const int* row_entries;
  const float* entry_weight;
  const float* s;           // null: no shared expert
  const float* gate_logit;  // row t at gate_logit[t * gate_stride]
  int64_t gate_stride;
  float* y;  // [T, H]
  WideCombine wide;
};

// Column j of row t. `out` is loaded with ld.global.cg: in the down call's tail it holds other
// CTAs' stores of the same launch, which an L1 line of this SM must not shadow.
__device__ __forceinline__ void routed_sum_column(const RoutedSum& c, int t, int j) {
  float acc = 0.0f;
  for (int r = 0; r < c.k; ++r) {
    const int p = c.row_entries[t * c.k + r];
    acc = __fadd_rn(acc, __fmul_rn(__ldcg(c.out + static_cast<int64_t>(p) * c.H + j), c.entry_weight[p]));
  }
  if (c.s != nullptr) {
    const float gate = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-c.gate_logit[t * c.gate_stride])));  // reference::sigmoid
    acc = __fadd_rn(acc, __fmul_rn(c.s[static_cast<int64_t>(t) * c.H + j], gate));
  }
  c.y[static_cast<int64_t>(t) * c.H + j] = acc;
  if (c.wide.out != nullptr) {
    const int64_t row = static_cast<int64_t>(t) * c.wide.S * c.H + j;
    for (int k2 = 0; k2 < c.wide.S; ++k2) {
      const int64_t i = row + static_cast<int64_t>(k2) * c.H;
      c.wide.out[i] = __fadd_rn(c.wide.x[i], __fmul_rn(acc, c.wide.alpha[t * c.wide.S + k2]));
    }
  }
}

}  // namespace strata::cuda::moe_detail
