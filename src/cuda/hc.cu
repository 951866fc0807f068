// Hyper-connection kernels (hc.h). Each follows src/reference/hc.cpp's evaluation order: sums of
// squares in double (as reference::grouped_rms_norm), then (x * r) * w; the stream mean sums in
// stream order and divides by S; products that feed a sum use __fmul_rn / __fadd_rn so nvcc
// cannot contract them into an FMA that the host code does not do.
#include "hc.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common.cuh"

namespace strata::cuda {
namespace {

constexpr int kNormThreads = 256;  // one CTA per (row, stream) of H = 2560: 10 values per thread
constexpr int kEltThreads = 256;

// grid (S, T): xn[t, s*H + j] = (x * r) * w over the H values of one stream. kVec: H % 4 == 0
// and every pointer 16-byte aligned, so each stream's row is a run of float4.
template <bool kVec>
__global__ void __launch_bounds__(kNormThreads) hc_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                               int S, int H, float eps, float* __restrict__ xn) {
  __shared__ double partial[kNormThreads / 32];
  const int s = blockIdx.x, t = blockIdx.y;
  const int64_t row = (static_cast<int64_t>(t) * S + s) * H;
  const float* xr = x + row;
  const float* wr = w + static_cast<int64_t>(s) * H;
  float* yr = xn + row;
  double ss = 0.0;
  if constexpr (kVec) {
    const auto* x4 = reinterpret_cast<const float4*>(xr);
    for (int q = threadIdx.x; q < H / 4; q += kNormThreads) {
      const float4 v = x4[q];
      ss += static_cast<double>(v.x) * v.x;
      ss += static_cast<double>(v.y) * v.y;
      ss += static_cast<double>(v.z) * v.z;
      ss += static_cast<double>(v.w) * v.w;
    }
  } else {
    for (int j = threadIdx.x; j < H; j += kNormThreads) ss += static_cast<double>(xr[j]) * xr[j];
  }
  const float r = inv_rms(block_sum_synced<kNormThreads>(ss, partial), H, eps);
  if constexpr (kVec) {
    const auto* x4 = reinterpret_cast<const float4*>(xr);
    const auto* w4 = reinterpret_cast<const float4*>(wr);
    auto* y4 = reinterpret_cast<float4*>(yr);
    for (int q = threadIdx.x; q < H / 4; q += kNormThreads) {
      const float4 v = x4[q], g = w4[q];
      y4[q] = make_float4((v.x * r) * g.x, (v.y * r) * g.y, (v.z * r) * g.z, (v.w * r) * g.w);
    }
  } else {
    for (int j = threadIdx.x; j < H; j += kNormThreads) yr[j] = (xr[j] * r) * wr[j];
  }
}

__global__ void __launch_bounds__(kEltThreads) hc_down_act_kernel(float* __restrict__ d, int n, float s) {
  const int i = blockIdx.x * kEltThreads + threadIdx.x;
  if (i < n) d[i] = silu_f(d[i] / s);
}

// One thread per (t, j) of u; the threads j < S of row t also write alpha[t, j].
__global__ void __launch_bounds__(kEltThreads) hc_gate_mean_kernel(const float* __restrict__ g,
                                                                   const float* __restrict__ xn,
                                                                   const float* __restrict__ a, int T, int S, int H,
                                                                   float* __restrict__ u, float* __restrict__ alpha) {
  const int i = blockIdx.x * kEltThreads + threadIdx.x;
  if (i >= T * H) return;
  const int t = i / H, j = i % H;
  const float s = static_cast<float>(S);
  const int64_t base = static_cast<int64_t>(t) * S * H + j;
  float acc = 0.0f;
  for (int k = 0; k < S; ++k) {
    const int64_t e = base + static_cast<int64_t>(k) * H;
    acc = __fadd_rn(acc, __fmul_rn(sigmoid_f(g[e]), xn[e]));
  }
  u[i] = acc / s;
  if (a != nullptr && j < S) alpha[t * S + j] = 2.0f * sigmoid_f(a[t * S + j] / s);
}

__global__ void __launch_bounds__(kEltThreads) hc_combine_kernel(float* __restrict__ x, const float* __restrict__ y,
                                                                 const float* __restrict__ alpha, int S, int H, int n) {
  const int i = blockIdx.x * kEltThreads + threadIdx.x;
  if (i >= n) return;
  const int wide = S * H;
  const int t = i / wide, s = (i % wide) / H, j = i % H;
  x[i] = __fadd_rn(x[i], __fmul_rn(y[t * H + j], alpha[t * S + s]));
}

__global__ void __launch_bounds__(kEltThreads) hc_broadcast_kernel(const float* __restrict__ e, int S, int H, int n,
                                                                   float* __restrict__ x) {
  const int i = blockIdx.x * kEltThreads + threadIdx.x;
  if (i >= n) return;
  const int wide = S * H;
  x[i] = e[(i / wide) * H + i % H];
}

__global__ void __launch_bounds__(kEltThreads) add_inplace_kernel(float* __restrict__ y, const float* __restrict__ x,
                                                                  int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kEltThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kEltThreads + threadIdx.x; i < n; i += stride) y[i] += x[i];
}

Status fail(const char* op, const std::string& what) { return Status::error(std::string("cuda: ") + op + ": " + what); }

// T rows of S streams of H: the window bound and an int-indexable element count.
Status check_rows(const char* op, int T, int S, int H) {
  if (T < 1 || T > kMaxWindowRows)
    return fail(op, "T must be in [1, " + std::to_string(kMaxWindowRows) + "], got " + std::to_string(T));
  if (S < 1 || H < 1) return fail(op, "S and H must be positive, got S=" + std::to_string(S) + " H=" + std::to_string(H));
  if (static_cast<int64_t>(T) * S * H > (int64_t{1} << 30))
    return fail(op, "T*S*H = " + std::to_string(static_cast<int64_t>(T) * S * H) + " exceeds 2^30");
  return Status::ok_status();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kEltThreads - 1) / kEltThreads); }

}  // namespace

Status hc_norm(const float* x, const float* w, int T, int S, int H, float eps, float* xn, Stream stream) {
  STRATA_TRY(check_rows("hc_norm", T, S, H));
  if (!x || !w || !xn) return fail("hc_norm", "x, w and xn must be non-null");
  if (T > 65535) return fail("hc_norm", "T exceeds the grid's y limit");
  const dim3 grid(static_cast<unsigned>(S), static_cast<unsigned>(T));
  if (H % 4 == 0 && aligned16(x) && aligned16(w) && aligned16(xn)) {
    hc_norm_kernel<true><<<grid, kNormThreads, 0, stream>>>(x, w, S, H, eps, xn);
  } else {
    hc_norm_kernel<false><<<grid, kNormThreads, 0, stream>>>(x, w, S, H, eps, xn);
  }
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

Status hc_down_act(float* d, int T, int rank, int S, Stream stream) {
  STRATA_TRY(check_rows("hc_down_act", T, S, rank));
  if (!d) return fail("hc_down_act", "d must be non-null");
  const int n = T * rank;
  hc_down_act_kernel<<<blocks_for(n), kEltThreads, 0, stream>>>(d, n, static_cast<float>(S));
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

Status hc_gate_mean(const float* g, const float* xn, const float* a, int T, int S, int H, float* u, float* alpha,
                    Stream stream) {
  STRATA_TRY(check_rows("hc_gate_mean", T, S, H));
  if (!g || !xn || !u) return fail("hc_gate_mean", "g, xn and u must be non-null");
  if (a && !alpha) return fail("hc_gate_mean", "alpha must be non-null when a (the inject logits) is given");
  if (a && S > H) return fail("hc_gate_mean", "S must be <= H (alpha is written by the first S threads of a row)");
  hc_gate_mean_kernel<<<blocks_for(static_cast<int64_t>(T) * H), kEltThreads, 0, stream>>>(g, xn, a, T, S, H, u, alpha);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

Status hc_combine(float* x, const float* y, const float* alpha, int T, int S, int H, Stream stream) {
  STRATA_TRY(check_rows("hc_combine", T, S, H));
  if (!x || !y || !alpha) return fail("hc_combine", "x, y and alpha must be non-null");
  const int n = T * S * H;
  hc_combine_kernel<<<blocks_for(n), kEltThreads, 0, stream>>>(x, y, alpha, S, H, n);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

Status hc_broadcast(const float* e, int T, int S, int H, float* x, Stream stream) {
  STRATA_TRY(check_rows("hc_broadcast", T, S, H));
  if (!e || !x) return fail("hc_broadcast", "e and x must be non-null");
  const int n = T * S * H;
  hc_broadcast_kernel<<<blocks_for(n), kEltThreads, 0, stream>>>(e, S, H, n, x);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

Status add_inplace(float* y, const float* x, int64_t n, Stream stream) {
  if (n < 0) return fail("add_inplace", "n must be >= 0, got " + std::to_string(n));
  if (n == 0) return Status::ok_status();
  if (!y || !x) return fail("add_inplace", "y and x must be non-null");
  // A grid-stride loop: a few CTAs per SM cover any n without a huge grid.
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(blocks_for(n), 4096));
  add_inplace_kernel<<<blocks, kEltThreads, 0, stream>>>(y, x, n);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

}  // namespace strata::cuda
