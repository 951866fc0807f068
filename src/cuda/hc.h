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
// Evaluation order follows src/reference/hc.cpp (sums in stream order, then / S).
//
// The fused pair replaces the first five steps when down, up and inject are float weights
// (F32 / F16 / BF16; quantized HC weights keep the steps above):
//   hc_pre:  inv_rms, r = silu(down(xn) / S), alpha = 2 sigmoid(inject(xn) / S)   one launch
//   hc_post: u = sum_s(sigmoid(up(r))_s * xn_s) / S, optionally also as q8_1       one launch
// xn is recomputed from X, the per-stream inv_rms and the norm weight where it is needed and
// never stored. Host-only.
#pragma once

#include <cstdint>

#include "dtensor.h"
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

// True when hc_pre / hc_post take this site: down [rank, S*H], up [S*H, rank] and inject
// ([S, S*H], or empty for a final mixer, of down's type) all F32 / F16 / BF16, S in [1, 8] (one
// thread-block cluster of S CTAs), H a multiple of 32 and rank a multiple of 8.
bool hc_fused_supported(const DTensor& down, const DTensor& up, const DTensor& inject, int S, int H, int rank);

struct HcPreArgs {
  const float* x = nullptr;     // [T, S*H] the wide residual
  const float* norm = nullptr;  // [S*H] the grouped norm's weight
  DTensor down;                 // [rank, S*H]
  DTensor inject;               // [S, S*H], or empty (final mixer: alpha is not written)
  int T = 1, S = 0, H = 0, rank = 0;
  float eps = 0.0f;
  float* r = nullptr;           // [T, rank]: silu(down(xn) / S)
  float* alpha = nullptr;       // [T, S]: 2 sigmoid(inject(xn) / S), when inject is set
  float* inv_rms = nullptr;     // [T, S]: each stream's 1 / rms, for hc_post
  // Optional fold of the previous block's combine: with y set, the X this mix takes is
  // x + alpha_prev (x) y (hc_combine's arithmetic, bit for bit), written to x_out, which must not
  // overlap x; hc_post must then read x_out. alpha_prev must not overlap alpha.
  const float* y = nullptr;           // [T, H]
  const float* alpha_prev = nullptr;  // [T, S]
  float* x_out = nullptr;             // [T, S*H]
};
Status hc_pre(const HcPreArgs& a, Stream stream);

struct HcPostArgs {
  const float* x = nullptr;        // [T, S*H] the X hc_pre read
  const float* norm = nullptr;     // [S*H]
  const float* inv_rms = nullptr;  // [T, S] from hc_pre
  const float* r = nullptr;        // [T, rank] from hc_pre
  DTensor up;                      // [S*H, rank]
  int T = 1, S = 0, H = 0, rank = 0;
  float* u = nullptr;              // [T, H]
  void* u_q8 = nullptr;            // optional: T q8_1 rows of u, byte-identical to quantize_q8_1
  int64_t u_q8_stride = 0;         // bytes between q8_1 rows (a multiple of 4, >= H / 32 * 36)
};
Status hc_post(const HcPostArgs& a, Stream stream);

// x[t, s*H + j] = e[t*H + j] for every stream s (the wide residual's start, spec §2).
Status hc_broadcast(const float* e, int T, int S, int H, float* x, Stream stream);

// y[i] += x[i] for n floats (the shared expert into the routed sum, and the like).
Status add_inplace(float* y, const float* x, int64_t n, Stream stream);

}  // namespace strata::cuda
