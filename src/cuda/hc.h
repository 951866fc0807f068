// Hyper-connection kernels (spec/model.md §4) and the other elementwise steps around the
// blocks. The mix is split where a mat-vec sits between two steps (the decoder runs the
// mat-vecs with linear()):
//   xn = hc_norm(X)                                grouped RMSNorm, one statistic per stream
//   d = down(xn); a = inject(xn)                   linear()
//   r = hc_down_act(d)                             silu(d / S), in place
//   g = up(r)                                      linear()
//   u, alpha = hc_gate_mean(g, xn, a)              u = sum_s(sigmoid(g_s) * xn_s) / S, alpha = 2 sigmoid(a / S)
//   ... block ...
//   hc_combine(X, y, alpha)                        X[t, s, :] += y[t, :] * alpha[t, s]
// The final mixer is the same without inject (a == nullptr, alpha unused).
// Evaluation order follows src/reference/hc.cpp (sums in stream order, then / S). Host-only.
#pragma once

#include <cstdint>

#include "strata/common/status.h"
#include "strata/cuda/mmvq.h"

namespace strata::cuda {

// xn[t, s*H + j] = x[t, s*H + j] * rsqrt(mean_j x[t, s*H + j]^2 + eps) * w[s*H + j]; rows of S*H.
Status hc_norm(const float* x, const float* w, int T, int S, int H, float eps, float* xn, Stream stream);

// d[t, i] = silu(d[t, i] / S) for T rows of `rank` values (contiguous).
Status hc_down_act(float* d, int T, int rank, int S, Stream stream);

// u [T, H]; alpha [T, S] (written only when a != nullptr; a is [T, S], the inject logits).
Status hc_gate_mean(const float* g, const float* xn, const float* a, int T, int S, int H, float* u, float* alpha,
                    Stream stream);

// x[t, s*H + j] += y[t*H + j] * alpha[t*S + s].
Status hc_combine(float* x, const float* y, const float* alpha, int T, int S, int H, Stream stream);

// x[t, s*H + j] = e[t*H + j] for every stream s (the wide residual's start, spec §2).
Status hc_broadcast(const float* e, int T, int S, int H, float* x, Stream stream);

// y[i] += x[i] for n floats (the shared expert into the routed sum, and the like).
Status add_inplace(float* y, const float* x, int64_t n, Stream stream);

}  // namespace strata::cuda
