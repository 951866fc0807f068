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

// Entries of a row whose loads are issued together: their entry indices, then their outputs and
// weights, before the additions use them, so a row of k <= 8 entries costs two round trips to
// memory rather than one per few entries (the tail of the down call sits on the step's critical
// path). The additions keep their order, so the bits do not change.
constexpr int kSumBatch = 8;
// Streams of the wide residual whose x and alpha are requested before the sum (the rest after it).
constexpr int kMaxWideStreams = 8;

// Column j of row t. `out` is loaded with ld.global.cg: in the down call's tail it holds other
// CTAs' stores of the same launch, which an L1 line of this SM must not shadow. The shared
// output, its gate and the wide residual do not depend on the sum: they are requested first.
__device__ __forceinline__ void routed_sum_column(const RoutedSum& c, int t, int j) {
  float sv = 0.0f, gl = 0.0f;
  if (c.s != nullptr) {
    sv = c.s[static_cast<int64_t>(t) * c.H + j];
    gl = c.gate_logit[t * c.gate_stride];
  }
  float xw[kMaxWideStreams], aw[kMaxWideStreams];
  const int64_t row = static_cast<int64_t>(t) * c.wide.S * c.H + j;
  if (c.wide.out != nullptr) {
#pragma unroll
    for (int k2 = 0; k2 < kMaxWideStreams; ++k2) {
      if (k2 >= c.wide.S) break;
      xw[k2] = c.wide.x[row + static_cast<int64_t>(k2) * c.H];
      aw[k2] = c.wide.alpha[t * c.wide.S + k2];
    }
  }
  float acc = 0.0f;
  for (int r0 = 0; r0 < c.k; r0 += kSumBatch) {
    int p[kSumBatch];
#pragma unroll
    for (int r = 0; r < kSumBatch; ++r) p[r] = r0 + r < c.k ? c.row_entries[t * c.k + r0 + r] : 0;
    float o[kSumBatch], w[kSumBatch];
#pragma unroll
    for (int r = 0; r < kSumBatch; ++r) {
      if (r0 + r >= c.k) break;
      o[r] = __ldcg(c.out + static_cast<int64_t>(p[r]) * c.H + j);
      w[r] = c.entry_weight[p[r]];
    }
#pragma unroll
    for (int r = 0; r < kSumBatch; ++r) {
      if (r0 + r >= c.k) break;
      acc = __fadd_rn(acc, __fmul_rn(o[r], w[r]));
    }
  }
  if (c.s != nullptr) {
    const float gate = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-gl)));  // reference::sigmoid
    acc = __fadd_rn(acc, __fmul_rn(sv, gate));
  }
  c.y[static_cast<int64_t>(t) * c.H + j] = acc;
  if (c.wide.out != nullptr) {
#pragma unroll
    for (int k2 = 0; k2 < kMaxWideStreams; ++k2) {
      if (k2 >= c.wide.S) break;
      c.wide.out[row + static_cast<int64_t>(k2) * c.H] = __fadd_rn(xw[k2], __fmul_rn(acc, aw[k2]));
    }
    for (int k2 = kMaxWideStreams; k2 < c.wide.S; ++k2) {
      const int64_t i = row + static_cast<int64_t>(k2) * c.H;
      c.wide.out[i] = __fadd_rn(c.wide.x[i], __fmul_rn(acc, c.wide.alpha[t * c.wide.S + k2]));
    }
  }
}

}  // namespace strata::cuda::moe_detail
