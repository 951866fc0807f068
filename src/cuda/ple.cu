// PLE injection (ple.h), mirroring reference::ple_inject from the key/value projections on.
// Two launches, both one CTA per (stream, row):
//   ple_norm_kernel   gate_s = sigmoid(signed sqrt(K_s . Q_s / sqrt(H))); N = norm(gate_s * V)
//                     into the history row history + t
//   ple_conv_kernel   C = silu(dilated conv over the history rows); X += GV + C
// The conv of row t reads N of rows t - ngram*(K-1-j), which other CTAs of the first launch
// write; the launch boundary orders them. The second launch recomputes the gate with the same
// code on the same inputs (bit-identical) instead of keeping it in a scratch buffer.
#include "ple.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "common.cuh"
#include "launch.cuh"

namespace strata::cuda {
namespace {

constexpr int kThreads = 256;

struct PleArgs {
  int S, H, ngram, K, history;
  float eps, sqrt_h;  // sqrt_h: float(sqrt(double(H))), as the reference
  const float* kp;    // [T, S*H]
  const float* vp;    // [T, H]
  const float* norm_key;
  const float* norm_query;
  const float* norm_conv;
  const float* conv_w;  // [S*H, K]
  float* hist;          // [history + T, S*H]
  float* x;             // [T, S*H]
};

// sigmoid(a'_s) of row t, stream s: K = (kp * rk) * wk and Q = (x * rq) * wq as grouped_rms_norm,
// their dot in double, / sqrt(H) in float, the signed square root with the 1e-6 clamp.
__device__ float ple_gate(const PleArgs& a, int t, int s, double* partial) {
  const int64_t off = (static_cast<int64_t>(t) * a.S + s) * a.H;
  const float* kr = a.kp + off;
  const float* xr = a.x + off;
  const float* wk = a.norm_key + static_cast<int64_t>(s) * a.H;
  const float* wq = a.norm_query + static_cast<int64_t>(s) * a.H;
  double ss_k = 0.0, ss_q = 0.0;
  for (int j = threadIdx.x; j < a.H; j += kThreads) {
    ss_k += static_cast<double>(kr[j]) * kr[j];
    ss_q += static_cast<double>(xr[j]) * xr[j];
  }
  const float rk = inv_rms(block_sum_synced<kThreads>(ss_k, partial), a.H, a.eps);
  const float rq = inv_rms(block_sum_synced<kThreads>(ss_q, partial), a.H, a.eps);
  double dot = 0.0;
  for (int j = threadIdx.x; j < a.H; j += kThreads) {
    const float k = (kr[j] * rk) * wk[j];
    const float q = (xr[j] * rq) * wq[j];
    dot += static_cast<double>(k) * q;
  }
  float logit = static_cast<float>(block_sum_synced<kThreads>(dot, partial)) / a.sqrt_h;
  const float sign = logit > 0.0f ? 1.0f : (logit < 0.0f ? -1.0f : 0.0f);
  logit = sqrtf(fmaxf(fabsf(logit), 1e-6f)) * sign;
  return sigmoid_f(logit);
}

// grid (S, T): N[t, s, :] = grouped_rms_norm(gate * V[t]; norm_conv) into hist row history + t.
__global__ void __launch_bounds__(kThreads) ple_norm_kernel(PleArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ double partial[kThreads / 32];
  const int s = blockIdx.x, t = blockIdx.y;
  const float gate = ple_gate(a, t, s, partial);
  const float* v = a.vp + static_cast<int64_t>(t) * a.H;
  double ss = 0.0;
  for (int j = threadIdx.x; j < a.H; j += kThreads) {
    const float gv = gate * v[j];
    ss += static_cast<double>(gv) * gv;
  }
  const float r = inv_rms(block_sum_synced<kThreads>(ss, partial), a.H, a.eps);
  const int64_t wide = static_cast<int64_t>(a.S) * a.H;
  float* n_row = a.hist + (a.history + t) * wide + static_cast<int64_t>(s) * a.H;
  const float* wn = a.norm_conv + static_cast<int64_t>(s) * a.H;
  for (int j = threadIdx.x; j < a.H; j += kThreads) n_row[j] = ((gate * v[j]) * r) * wn[j];
}

// grid (S, T): C[c] = silu(sum_j w[c, j] * N[t + j*ngram][c]) in double (hist row t + j*ngram is
// step (K-1-j)*ngram back from row t's own row history + t), then X += GV + C.
__global__ void __launch_bounds__(kThreads) ple_conv_kernel(PleArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ double partial[kThreads / 32];
  const int s = blockIdx.x, t = blockIdx.y;
  // Every read of this CTA's x slice happens inside ple_gate, before its last barrier, so the
  // in-place update below cannot race with it; no other CTA touches this slice.
  const float gate = ple_gate(a, t, s, partial);
  const float* v = a.vp + static_cast<int64_t>(t) * a.H;
  const int64_t wide = static_cast<int64_t>(a.S) * a.H;
  float* xr = a.x + t * wide + static_cast<int64_t>(s) * a.H;
  for (int j = threadIdx.x; j < a.H; j += kThreads) {
    const int64_t c = static_cast<int64_t>(s) * a.H + j;
    double acc = 0.0;
    for (int k = 0; k < a.K; ++k) {
      acc += static_cast<double>(a.conv_w[c * a.K + k]) * a.hist[(t + static_cast<int64_t>(k) * a.ngram) * wide + c];
    }
    const float conv = silu_f(static_cast<float>(acc));
    // x + (GV + C) as the reference; _rn keeps nvcc from fusing gate * v into the add.
    xr[j] += __fadd_rn(__fmul_rn(gate, v[j]), conv);
  }
}

// One thread per channel walks the rows upward: row i + n is read before iteration i + n
// overwrites it, so the overlapping move is safe in place.
__global__ void __launch_bounds__(kThreads) ple_commit_kernel(float* hist, int64_t wide, int history, int n) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= wide) return;
  for (int i = 0; i < history; ++i) hist[i * wide + c] = hist[(i + n) * wide + c];
}

Status fail(const char* op, const std::string& what) { return Status::error(std::string("cuda: ") + op + ": " + what); }

Status check_dims(const char* op, const PleDims& d) {
  if (d.S < 1 || d.H < 1) return fail(op, "S and H must be positive, got S=" + std::to_string(d.S) + " H=" + std::to_string(d.H));
  if (d.ngram < 1 || d.conv_kernel < 1)
    return fail(op, "ngram and conv_kernel must be positive, got ngram=" + std::to_string(d.ngram) +
                        " conv_kernel=" + std::to_string(d.conv_kernel));
  if (static_cast<int64_t>(d.S) * d.H > (int64_t{1} << 28)) return fail(op, "S*H exceeds 2^28");
  return Status::ok_status();
}

}  // namespace

Status ple_inject(const PleDims& d, const float* kp, const float* vp, const float* norm_key, const float* norm_query,
                  const float* norm_conv, const float* conv_w, float* hist, float* x, int T, Stream stream) {
  STRATA_TRY(check_dims("ple_inject", d));
  if (T < 1 || T > kMaxWindowRows)
    return fail("ple_inject", "T must be in [1, " + std::to_string(kMaxWindowRows) + "], got " + std::to_string(T));
  if (!kp || !vp || !norm_key || !norm_query || !norm_conv || !conv_w || !hist || !x)
    return fail("ple_inject", "every tensor pointer must be non-null");
  if (d.S > 65535) return fail("ple_inject", "S exceeds 65535");
  const PleArgs a{d.S,      d.H,        d.ngram,   d.conv_kernel, d.history(), d.eps,
                  static_cast<float>(std::sqrt(static_cast<double>(d.H))),
                  kp,       vp,         norm_key,  norm_query,    norm_conv,   conv_w,
                  hist,     x};
  const dim3 grid(static_cast<unsigned>(d.S), static_cast<unsigned>(T));
  STRATA_CUDA_TRY(launch_kernel(ple_norm_kernel, grid, dim3(kThreads), 0, stream, a));
  STRATA_CUDA_TRY(launch_kernel(ple_conv_kernel, grid, dim3(kThreads), 0, stream, a));
  return Status::ok_status();
}

Status ple_conv_commit(const PleDims& d, float* hist, int n, Stream stream) {
  STRATA_TRY(check_dims("ple_conv_commit", d));
  if (n < 0 || n > kMaxWindowRows)
    return fail("ple_conv_commit", "n must be in [0, " + std::to_string(kMaxWindowRows) + "], got " + std::to_string(n));
  if (!hist) return fail("ple_conv_commit", "hist must be non-null");
  if (n == 0 || d.history() == 0) return Status::ok_status();
  const int64_t wide = static_cast<int64_t>(d.S) * d.H;
  STRATA_CUDA_TRY(launch_kernel(ple_commit_kernel, dim3(static_cast<unsigned>((wide + kThreads - 1) / kThreads)),
                                dim3(kThreads), 0, stream, hist, wide, d.history(), n));
  return Status::ok_status();
}

}  // namespace strata::cuda
