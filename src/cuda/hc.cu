// Hyper-connection kernels (hc.h). Each follows src/reference/hc.cpp's evaluation order: sums of
// squares in double (as reference::grouped_rms_norm), then (x * r) * w; the stream mean sums in
// stream order and divides by S; products that feed a sum use __fmul_rn / __fadd_rn so nvcc
// cannot contract them into an FMA that the host code does not do.
#include "hc.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include "common.cuh"
#include "float_weights.cuh"
#include "launch.cuh"
#include "q8_1.cuh"
#include "strata/cuda/switches.h"

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
  pdl_launch_dependents();
  pdl_wait();
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
  pdl_launch_dependents();
  pdl_wait();
  const int i = blockIdx.x * kEltThreads + threadIdx.x;
  if (i < n) d[i] = silu_f(d[i] / s);
}

// One thread per (t, j) of u; the threads j < S of row t also write alpha[t, j].
__global__ void __launch_bounds__(kEltThreads) hc_gate_mean_kernel(const float* __restrict__ g,
                                                                   const float* __restrict__ xn,
                                                                   const float* __restrict__ a, int T, int S, int H,
                                                                   float* __restrict__ u, float* __restrict__ alpha) {
  pdl_launch_dependents();
  pdl_wait();
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

// One element of the hyper-connection combine, x + y * alpha, rounded once per operation (no FMA):
// hc_combine_kernel and the combine hc_pre folds in must agree bit for bit.
__device__ __forceinline__ float combined(float x, float y, float alpha) { return __fadd_rn(x, __fmul_rn(y, alpha)); }

// out may be x (in place): each element is read and written by the same thread only.
__global__ void __launch_bounds__(kEltThreads) hc_combine_kernel(const float* x, const float* __restrict__ y,
                                                                 const float* __restrict__ alpha, int S, int H, int n,
                                                                 float* out) {
  pdl_launch_dependents();
  pdl_wait();
  const int i = blockIdx.x * kEltThreads + threadIdx.x;
  if (i >= n) return;
  const int wide = S * H;
  const int t = i / wide, s = (i % wide) / H, j = i % H;
  out[i] = combined(x[i], y[t * H + j], alpha[t * S + s]);
}

__global__ void __launch_bounds__(kEltThreads) hc_broadcast_kernel(const float* __restrict__ e, int S, int H, int n,
                                                                   float* __restrict__ x) {
  pdl_launch_dependents();
  pdl_wait();
  const int i = blockIdx.x * kEltThreads + threadIdx.x;
  if (i >= n) return;
  const int wide = S * H;
  x[i] = e[(i / wide) * H + i % H];
}

__global__ void __launch_bounds__(kEltThreads) add_inplace_kernel(float* __restrict__ y, const float* __restrict__ x,
                                                                  int64_t n) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kEltThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kEltThreads + threadIdx.x; i < n; i += stride) y[i] += x[i];
}

// ---- the fused mix: hc_pre and hc_post ------------------------------------------------------------
//
// Both run as thread-block clusters of S CTAs, CTA rank s owning stream s: the work a stream needs
// (its inv_rms, its K-slice of down / inject, its H rows of up) stays inside one CTA, and each CTA
// stores its partial sums into rank 0's shared memory (DSMEM), which adds them in stream order, so
// no partial sums go through global memory and no second launch is needed.
//
// hc_pre, cluster g = output rows 4g .. 4g+3 of [down; inject] (rank + S rows; 5 rows at T = 2,
// see kPreRows), CTA s = columns
// s*H .. s*H+H-1. Released geometry (S=4, H=2560, rank 320, BF16): 81 clusters = 324 CTAs of 160
// threads, all resident at once (3 per SM up to T = 4; at T = 8 the staged X allows 2). Bytes per launch at T = 1: weights 324 * 4 * 2560 *
// 2 = 6.6 MB from HBM (prefetched to L2 before pdl_wait, so the fetch overlaps the previous
// kernel's tail; each element read once for all T rows); X slice T * 10 KB (at T >= 4 staged in
// shared memory once, its sums of squares taken while staging, then read from there by every
// row's dots) and norm slice 10 KB per CTA from L2 (3.3 MB + 3.3 MB at T = 1). Work: the sum of squares (H per row and stream, double),
// per weight element one multiply x * norm (once per t) and one FMA per t, and per stream sum one
// multiply by the stream's inv_rms. Each thread keeps
// 2 x 4 16-byte weight loads in flight (20 KB per CTA: the CTA's whole share). With a folded combine every CTA forms
// x + alpha_prev * y itself where it reads x (y: T * 10 KB more per CTA from L2) and cluster 0
// writes the combined X to x_out (T * 40 KB): the separate combine launch (read 2 x, write x) goes.
//
// hc_post, cluster b = u columns 32b .. 32b+31 (one q8_1 block), CTA s = the 32 rows s*H + 32b ..
// of up (32 * rank weights, contiguous). 8 lanes per row split K = rank; rank 0 sums the S
// streams' sigmoid(g) * xn in stream order, divides by S, writes u and its q8_1 block. Released
// geometry: 80 clusters = 320 CTAs, 32 * 320 * 2 = 20 KB of weights per CTA (6.6 MB per launch),
// 5 16-byte loads per thread, all issued before pdl_wait; at T >= 4 r (T * rank floats) staged in
// shared memory, so each row t's products read it without an L2 round trip.

namespace cg = cooperative_groups;

constexpr int kMaxClusterStreams = 8;  // the portable cluster size
// Floats per row that hc_pre (H) and hc_post (rank) stage in shared memory: 8 rows of 4096 are
// 128 KB, under the 227 KB a CTA may have.
constexpr int kMaxStagedFloats = 4096;

// Each CTA pushes its partial sums into rank 0's shared memory by st.async, counted on an
// mbarrier of rank 0 (common.cuh's cluster_push): rank 0 then reads them locally, no CTA has to
// stay resident until rank 0 is done with its shared memory (a second barrier), and no CTA fences
// its stores (the release half of a cluster barrier) before leaving.

// kN consecutive floats (kN a multiple of 4, 16-byte aligned) from global memory.
template <int kN>
__device__ __forceinline__ void load_floats(const float* p, float* f) {
#pragma unroll
  for (int k = 0; k < kN / 4; ++k) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p) + k);
    f[4 * k] = v.x;
    f[4 * k + 1] = v.y;
    f[4 * k + 2] = v.z;
    f[4 * k + 3] = v.w;
  }
}

// 160 threads: a released-geometry row of one stream (H = 2560 BF16, 320 16-byte vectors) is then
// exactly kPreBatch vectors a thread, all requested before pdl_wait(), none idle; 256 left 192
// threads with an empty second batch whose registers (120 at T = 4) held the kernel to two CTAs
// per SM, and its 324 CTAs to two waves. At 160 threads three CTAs fit at every T up to 4: T = 4
// windows 6.1% faster, T = 1 unchanged (bench/results/2026-12-01-h200-hc160-topk).
constexpr int kPreThreads = 160;
[[maybe_unused]] constexpr int kPreWarps = kPreThreads / 32;
// Output rows of [down; inject] per cluster: 4 (81 clusters, 324 CTAs); 5 at T = 2 (65 clusters,
// 260 CTAs), chosen when CTAs of 256 threads fit only two per SM there (H200: T = 2 windows 7.97 ->
// 7.87 ms) and kept since (fewer clusters read X). At T = 4 and 8 five rows spill (92 bytes a
// thread at T = 4 under 128 registers).
template <int kT>
constexpr int kPreRows = kT == 2 ? 5 : 4;
constexpr int kPreBatch = 2;  // 16-byte vectors per row and thread in flight

struct HcPreParams {
  const float* x;
  const float* norm;
  const uint8_t* down;
  const uint8_t* inject;  // null: final mixer
  int64_t row_bytes;      // of down and inject (S*H weights)
  int T, S, H, rank, n_out;
  float eps;
  float* r;
  float* alpha;
  float* inv_rms;
  const float* y;           // null: no combine folded in
  const float* alpha_prev;
  float* x_out;
};

// kN consecutive values of this CTA's stream of the X the mix takes, row t, from column j of the
// stream (j a multiple of 4): x itself, or with the folded combine x + y * alpha_prev as
// hc_combine_kernel rounds it.
template <int kN>
__device__ __forceinline__ void load_mix_x(const HcPreParams& p, int t, int sid, int j, float* f) {
  const int64_t wide = static_cast<int64_t>(p.S) * p.H;
  load_floats<kN>(p.x + t * wide + static_cast<int64_t>(sid) * p.H + j, f);
  if (p.y != nullptr) {
    float yv[kN];
    load_floats<kN>(p.y + static_cast<int64_t>(t) * p.H + j, yv);
    const float a = p.alpha_prev[t * p.S + sid];
#pragma unroll
    for (int e = 0; e < kN; ++e) f[e] = combined(f[e], yv[e], a);
  }
}

constexpr int kStageBatch = 4;  // float4 per thread whose loads are all issued before any is used
template <int kT>
constexpr bool kStagedRows = kT >= 4;  // r staged in hc_post's shared memory
// hc_pre stages X at T = 4 only: at T = 8 the 80 KB of X allow two CTAs per SM, and its 324 CTAs
// would take two waves; unstaged, three fit (its registers allow three at 160 threads).
template <int kT>
constexpr bool kPreStaged = kT == 4;

// This CTA's stream of the window's X (p.T rows of H) into shared memory, xs[t * H/4 + q]: x itself,
// or with the folded combine x + y * alpha_prev as hc_combine_kernel rounds it (cluster 0 also
// writes that to x_out). Staged once, X is read from shared memory by every row of the dots,
// instead of one L2 round trip per row t and vector. The thread's share of each row's sum of
// squares (in double, as reference::grouped_rms_norm) is taken from the registers that stage it,
// so no second pass over X sits between the staging and the dots. Windows of T = 4 only
// (kPreStaged): at T = 1 staging measured 2% slower per token (the barrier after it, for one row
// that each vector is read from L2 once anyway).
template <int kT>
__device__ __forceinline__ void stage_x(const HcPreParams& p, int sid, bool write_x, float4* xs, double (&ss)[kT]) {
  const int h4 = p.H / 4;
  const int64_t wide4 = static_cast<int64_t>(p.S) * h4, col4 = static_cast<int64_t>(sid) * h4;
  const auto* x4 = reinterpret_cast<const float4*>(p.x);
  const auto* y4 = reinterpret_cast<const float4*>(p.y);
  auto* out4 = reinterpret_cast<float4*>(p.x_out);
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    ss[t] = 0.0;
    if (t >= p.T) continue;
    const float a = p.y != nullptr ? __ldg(p.alpha_prev + t * p.S + sid) : 0.0f;
    for (int base = threadIdx.x; base < h4; base += kPreThreads * kStageBatch) {
      float4 v[kStageBatch], yv[kStageBatch];
#pragma unroll
      for (int k = 0; k < kStageBatch; ++k) {
        const int q = base + k * kPreThreads;
        if (q >= h4) break;
        v[k] = __ldg(x4 + t * wide4 + col4 + q);
        if (p.y != nullptr) yv[k] = __ldg(y4 + static_cast<int64_t>(t) * h4 + q);
      }
#pragma unroll
      for (int k = 0; k < kStageBatch; ++k) {
        const int q = base + k * kPreThreads;
        if (q >= h4) break;
        float4 f = v[k];
        if (p.y != nullptr) {
          f = make_float4(combined(f.x, yv[k].x, a), combined(f.y, yv[k].y, a), combined(f.z, yv[k].z, a),
                          combined(f.w, yv[k].w, a));
          if (write_x) out4[t * wide4 + col4 + q] = f;
        }
        xs[t * h4 + q] = f;
        ss[t] += static_cast<double>(f.x) * f.x;
        ss[t] += static_cast<double>(f.y) * f.y;
        ss[t] += static_cast<double>(f.z) * f.z;
        ss[t] += static_cast<double>(f.w) * f.w;
      }
    }
  }
}

// Batch `base` of this thread's vectors of the kPreRows rows (zero past the row or the tensor).
template <quant::Type WT, int kRows>
__device__ __forceinline__ void load_pre_batch(uint4 (&w)[kPreBatch][kRows], const uint8_t* const (&rows)[kRows],
                                               int base, int nvec) {
#pragma unroll
  for (int b = 0; b < kPreBatch; ++b) {
    const int v = base + b * kPreThreads;
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      w[b][r] = rows[r] != nullptr && v < nvec ? __ldcs(reinterpret_cast<const uint4*>(rows[r]) + v) : make_uint4(0, 0, 0, 0);
  }
}

// This thread's share of the window's X for one stream, x_out written where the fold asks for it,
// and the sum of squares per row t in double (as reference::grouped_rms_norm).
template <int kT>
__device__ __forceinline__ void pre_squares(const HcPreParams& p, int sid, bool write_x, double (&ss)[kT]) {
  const int64_t wide = static_cast<int64_t>(p.S) * p.H, col0 = static_cast<int64_t>(sid) * p.H;
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    ss[t] = 0.0;
    if (t >= p.T) continue;
    for (int q = threadIdx.x; q < p.H / 4; q += kPreThreads) {
      float v[4];
      load_mix_x<4>(p, t, sid, 4 * q, v);
      if (write_x) *reinterpret_cast<float4*>(p.x_out + t * wide + col0 + 4 * q) = make_float4(v[0], v[1], v[2], v[3]);
#pragma unroll
      for (int e = 0; e < 4; ++e) ss[t] += static_cast<double>(v[e]) * v[e];
    }
  }
}

// The dot products are taken over x * norm and each stream's sum is scaled by its inv_rms once
// (down(xn) = sum_s inv_rms_s * sum_j w * (x * norm)): the rms is not needed inside the loop, so
// at T = 1 (kOnePass) the sums of squares ride along in the same pass over X and the CTA reduces
// them together with the dots, one barrier for both. At T >= 2 the squares are reduced first (their
// kT doubles would otherwise stay live through the loop), which leaves room for 5 rows at T = 4.
template <quant::Type WT, int kT>
__global__ void __launch_bounds__(kPreThreads, 3) hc_pre_kernel(const HcPreParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // thread-block clusters need sm_90; hc_fused_supported() keeps older devices off this path
#else
  constexpr int kVec = kWeightsPerVec<WT>;
  constexpr int kRows = kPreRows<kT>;
  constexpr bool kOnePass = kT == 1;
  __shared__ double ss_part[kPreWarps][kMaxWindowRows];
  __shared__ float rms[kMaxWindowRows];
  __shared__ float red[kPreWarps][kRows][kMaxWindowRows];
  __shared__ float part_all[kMaxClusterStreams][kRows * kMaxWindowRows];  // rank 0's: stream k's dot products
  __shared__ uint64_t part_bar;  // rank 0's: counts the bytes pushed into part_all
  extern __shared__ float4 xs[];  // kPreStaged: [p.T][H / 4], this stream's X (stage_x)
  const cg::cluster_group cluster = cg::this_cluster();
  const int sid = static_cast<int>(cluster.block_rank());
  // Rank 0 stores its own partials itself; the other S - 1 ranks push theirs.
  if (sid == 0 && threadIdx.x == 0) cluster_push_init(&part_bar, (p.S - 1) * kRows * kMaxWindowRows * sizeof(float));
  cluster_arrive_relaxed();  // phase 1
  const int row0 = static_cast<int>(blockIdx.x) / p.S * kRows;
  const int nvec = p.H / kVec;
  const int64_t col0 = static_cast<int64_t>(sid) * p.H;  // the stream's first column of a wide row
  const int64_t wide = static_cast<int64_t>(p.S) * p.H;
  const bool write_x = p.y != nullptr && row0 == 0;      // cluster 0 writes the combined X once
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  pdl_launch_dependents();
  const uint8_t* rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int gr = row0 + r;
    const uint8_t* base = gr < p.rank ? p.down + gr * p.row_bytes
                          : gr < p.n_out ? p.inject + (gr - p.rank) * p.row_bytes
                                         : nullptr;
    rows[r] = base != nullptr ? base + col0 * kWeightBytes<WT> : nullptr;
    if (rows[r] != nullptr) prefetch_l2(rows[r], static_cast<int64_t>(p.H) * kWeightBytes<WT>);
  }
  uint4 w[kPreBatch][kRows];
  load_pre_batch<WT, kRows>(w, rows, threadIdx.x, nvec);  // pdl-pre-wait: weights: no kernel of the window writes them
  pdl_wait();

  constexpr bool kStaged = kPreStaged<kT>;
  double ss[kT];
  if constexpr (!kOnePass) {
    if constexpr (kStaged) {
      stage_x<kT>(p, sid, write_x, xs, ss);  // the barrier below also publishes xs
    } else {
      pre_squares<kT>(p, sid, write_x, ss);
    }
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      double v = ss[t];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) ss_part[warp][t] = v;
    }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < p.T) {
      double total = 0.0;
      for (int k = 0; k < kPreWarps; ++k) total += ss_part[k][threadIdx.x];
      rms[threadIdx.x] = inv_rms(total, p.H, p.eps);
      if (row0 == 0) p.inv_rms[threadIdx.x * p.S + sid] = rms[threadIdx.x];
    }
  } else {
    ss[0] = 0.0;
  }

  // One FMA per weight and row t over xw = x * norm.
  float acc[kRows][kT];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kT; ++t) acc[r][t] = 0.0f;
  for (int base = threadIdx.x; base < nvec; base += kPreThreads * kPreBatch) {
    if (base != static_cast<int>(threadIdx.x)) load_pre_batch<WT, kRows>(w, rows, base, nvec);
#pragma unroll
    for (int b = 0; b < kPreBatch; ++b) {
      const int v = base + b * kPreThreads;
      if (v >= nvec) break;
      float wf[kRows][kVec];
#pragma unroll
      for (int r = 0; r < kRows; ++r) weight_floats<WT>(w[b][r], wf[r]);
      float nw[kVec];
      load_floats<kVec>(p.norm + col0 + static_cast<int64_t>(v) * kVec, nw);
#pragma unroll
      for (int t = 0; t < kT; ++t) {
        if (t >= p.T) break;
        float xw[kVec];
        if constexpr (kStaged) {
#pragma unroll
          for (int e = 0; e < kVec; e += 4) {
            const float4 f = xs[t * (p.H / 4) + (v * kVec + e) / 4];
            xw[e] = f.x;
            xw[e + 1] = f.y;
            xw[e + 2] = f.z;
            xw[e + 3] = f.w;
          }
        } else {
          load_mix_x<kVec>(p, t, sid, v * kVec, xw);
        }
        if constexpr (kOnePass) {
          if (write_x)
#pragma unroll
            for (int e = 0; e < kVec; e += 4)
              *reinterpret_cast<float4*>(p.x_out + t * wide + col0 + v * kVec + e) =
                  make_float4(xw[e], xw[e + 1], xw[e + 2], xw[e + 3]);
#pragma unroll
          for (int e = 0; e < kVec; ++e) ss[t] += static_cast<double>(xw[e]) * xw[e];
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) xw[e] = __fmul_rn(xw[e], nw[e]);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[r][t] = fmaf(wf[r][e], xw[e], acc[r][t]);
      }
    }
  }

  // Lanes, then warps in order, scaled by the stream's inv_rms, then (rank 0) the streams in order.
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0) red[warp][r][t] = v;
    }
  if constexpr (kOnePass) {
    double v = ss[0];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) ss_part[warp][0] = v;
  }
  __syncthreads();
  cluster_wait_acquire();  // phase 1: every CTA of the cluster has started
  if (threadIdx.x < kRows * kMaxWindowRows) {
    const int r = threadIdx.x / kMaxWindowRows, t = threadIdx.x % kMaxWindowRows;
    float v = 0.0f;  // rows t >= kT are never read
    if (t < kT && t < p.T) {
      float scale;
      if constexpr (kOnePass) {  // every thread of row t forms the same total in the same order
        double total = 0.0;
        for (int k = 0; k < kPreWarps; ++k) total += ss_part[k][0];
        scale = inv_rms(total, p.H, p.eps);
        if (row0 == 0 && r == 0) p.inv_rms[sid] = scale;
      } else {
        scale = rms[t];
      }
      for (int k = 0; k < kPreWarps; ++k) v += red[k][r][t];
      v *= scale;
    }
    if (sid == 0) {
      part_all[0][threadIdx.x] = v;
    } else {
      cluster_push(cluster_rank_addr(&part_all[sid][threadIdx.x], 0), v, cluster_rank_addr(&part_bar, 0));
    }
  }
  if (sid != 0) return;
  cluster_push_wait(&part_bar);  // the other streams' partials are in
  __syncthreads();               // and this stream's, stored by other threads of the CTA
  if (threadIdx.x < kRows * kMaxWindowRows) {
    const int r = threadIdx.x / kMaxWindowRows, t = threadIdx.x % kMaxWindowRows, gr = row0 + r;
    if (t < p.T && gr < p.n_out) {
      float d = 0.0f;
      for (int k = 0; k < p.S; ++k) d += part_all[k][threadIdx.x];
      const float s = static_cast<float>(p.S);
      if (gr < p.rank) {
        p.r[t * p.rank + gr] = silu_f(d / s);
      } else {
        p.alpha[t * p.S + gr - p.rank] = 2.0f * sigmoid_f(d / s);
      }
    }
  }
#endif
}

constexpr int kPostThreads = 256;
constexpr int kPostCols = 32;                                  // one q8_1 block of u per cluster
[[maybe_unused]] constexpr int kLanesPerRow = kPostThreads / kPostCols;         // 8 lanes split one row's K
// 16-byte vectors per lane in flight: rank 320 BF16 is 40 vectors a row, 5 per lane, so one batch
// holds the whole row (8 left three empty loads' registers that kept T = 4 and 8 above one wave).
constexpr int kPostBatch = 5;

struct HcPostParams {
  const float* x;
  const float* norm;
  const float* inv_rms;
  const float* r;
  const uint8_t* up;
  int64_t row_bytes;
  int T, S, H, rank;
  float* u;
  uint8_t* u_q8;
  int64_t q8_stride;
};

// Rank 0 of an hc_post cluster, once every stream's sigmoid(g) * xn is in prod_all: u of block
// blk (the streams summed in order, divided by S) and its q8_1 block.
[[maybe_unused]] __device__ __forceinline__ void post_finish(
    const HcPostParams& p, int blk, const float (&prod_all)[kMaxClusterStreams][kMaxWindowRows * kPostCols],
    float (&ublk)[kMaxWindowRows][kPostCols]) {
  const int t = threadIdx.x / kPostCols, j = threadIdx.x % kPostCols;  // 256 threads = 8 rows of 32
  if (t < p.T) {
    float sum = 0.0f;
    for (int k = 0; k < p.S; ++k) sum = __fadd_rn(sum, prod_all[k][t * kPostCols + j]);
    const float uv = sum / static_cast<float>(p.S);
    p.u[static_cast<int64_t>(t) * p.H + blk * kPostCols + j] = uv;
    ublk[t][j] = uv;
  }
  if (p.u_q8 != nullptr) {
    __syncthreads();
    // Warps 0 and 1: eight lanes per row t, four values each, as quantize_q8_1_kernel.
    if (threadIdx.x < kMaxWindowRows * 8) {
      const int qt = threadIdx.x / 8, part = threadIdx.x % 8;
      const bool live = qt < p.T;
      const float4 v = live ? *reinterpret_cast<const float4*>(&ublk[qt][part * 4]) : make_float4(0.f, 0.f, 0.f, 0.f);
      quantize_q8_1_quad(v, live, p.u_q8 + qt * p.q8_stride, blk, part);
    }
  }
}

template <quant::Type WT>
__device__ __forceinline__ void load_post_batch(uint4 (&w)[kPostBatch], const uint8_t* row, int base, int nvec) {
#pragma unroll
  for (int i = 0; i < kPostBatch; ++i) {
    const int v = base + i * kLanesPerRow;
    w[i] = v < nvec ? __ldcs(reinterpret_cast<const uint4*>(row) + v) : make_uint4(0, 0, 0, 0);
  }
}

// Float4 slot of k's quad q in hc_post's staged r: [k][kQuads] with the low three bits XORed by
// k's vector index mod 8 (a permutation inside each aligned group of 8 slots), so that the 8 lanes
// of a row, whose vectors are 8 apart, read distinct bank groups.
__device__ __forceinline__ int r_slot(int k, int q, int quads) { return (k * quads + q) ^ ((k >> 3) & 7); }

template <quant::Type WT, int kT>
__global__ void __launch_bounds__(kPostThreads) hc_post_kernel(const HcPostParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // thread-block clusters need sm_90; hc_fused_supported() keeps older devices off this path
#else
  constexpr int kVec = kWeightsPerVec<WT>;
  __shared__ float prod_all[kMaxClusterStreams][kMaxWindowRows * kPostCols];  // rank 0's: stream k's sigmoid(g) * xn
  __shared__ __align__(16) float ublk[kMaxWindowRows][kPostCols];
  __shared__ uint64_t prod_bar;  // rank 0's: counts the bytes pushed into prod_all
  extern __shared__ float4 rs[];  // kStagedRows: [rank][kT / 4], r with a k's window rows side by side
  const cg::cluster_group cluster = cg::this_cluster();
  const int sid = static_cast<int>(cluster.block_rank());
  // Rank 0 stores its own products itself; the other S - 1 ranks push theirs.
  if (sid == 0 && threadIdx.x == 0) cluster_push_init(&prod_bar, (p.S - 1) * p.T * kPostCols * sizeof(float));
  cluster_arrive_relaxed();  // phase 1
  const int blk = static_cast<int>(blockIdx.x) / p.S;
  const int c = threadIdx.x / kLanesPerRow, sub = threadIdx.x % kLanesPerRow;  // column in the block, K part
  const int64_t wide = static_cast<int64_t>(p.S) * p.H;
  const int64_t first_row = static_cast<int64_t>(sid) * p.H + static_cast<int64_t>(blk) * kPostCols;
  const uint8_t* row = p.up + (first_row + c) * p.row_bytes;
  const int nvec = p.rank / kVec;

  const int64_t col = first_row + c;  // this stream's column of the wide row

  pdl_launch_dependents();
  prefetch_l2(p.up + first_row * p.row_bytes, kPostCols * p.row_bytes);
  uint4 w[kPostBatch];
  load_post_batch<WT>(w, row, sub, nvec);  // pdl-pre-wait: weights
  const float nw = sub == 0 ? __ldg(p.norm + col) : 0.0f;  // pdl-pre-wait: weight
  pdl_wait();
  // xn's operands, loaded now so that they arrive during the dots rather than after them.
  float xv[kT], ir[kT];
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    const bool live = sub == 0 && t < p.T;
    xv[t] = live ? p.x[t * wide + col] : 0.0f;
    ir[t] = live ? p.inv_rms[t * p.S + sid] : 0.0f;
  }

  // kStagedRows: r (p.T rows of rank, written by hc_pre) into shared memory, a k's kT rows side by
  // side (zeros past p.T), so that the dots read all rows of a weight's k with kT / 4 16-byte
  // loads: stored [t][k], they took a scalar load per row and weight (ptxas cannot prove a
  // runtime rank's rows 16-byte aligned), ~4x the shared-memory loads of the dot loop at T = 4.
  // Every load of a thread is issued before any is stored. The 8 lanes of a row read vectors 8
  // apart (k 64 apart); unswizzled, their 16-byte reads would all fall in one bank group, so a
  // k's slot is XORed with its vector index (r_slot).
  constexpr bool kStaged = kStagedRows<kT>;
  constexpr int kQuads = kT / 4;
  if constexpr (kStaged) {
    constexpr int kPer = 2;  // k values per thread and pass: rank 320 is one pass of 256 threads
    for (int base = threadIdx.x; base < p.rank; base += kPostThreads * kPer) {
      float v[kPer][kT];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int k = base + i * kPostThreads;
#pragma unroll
        for (int t = 0; t < kT; ++t) v[i][t] = k < p.rank && t < p.T ? __ldg(p.r + t * p.rank + k) : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int k = base + i * kPostThreads;
        if (k >= p.rank) break;
#pragma unroll
        for (int q = 0; q < kQuads; ++q)
          rs[r_slot(k, q, kQuads)] = make_float4(v[i][4 * q], v[i][4 * q + 1], v[i][4 * q + 2], v[i][4 * q + 3]);
      }
    }
    __syncthreads();
  }

  float acc[kT];
#pragma unroll
  for (int t = 0; t < kT; ++t) acc[t] = 0.0f;
  for (int base = sub; base < nvec; base += kLanesPerRow * kPostBatch) {
    if (base != sub) load_post_batch<WT>(w, row, base, nvec);
#pragma unroll
    for (int i = 0; i < kPostBatch; ++i) {
      const int v = base + i * kLanesPerRow;
      if (v >= nvec) break;
      float wf[kVec];
      weight_floats<WT>(w[i], wf);
      if constexpr (kStaged) {
        // Rows past p.T multiply staged zeros into sums nobody reads; each row's sum still adds
        // its products in k order, as the unstaged form does.
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
#pragma unroll
          for (int q = 0; q < kQuads; ++q) {
            const float4 r4 = rs[r_slot(v * kVec + e, q, kQuads)];
            acc[4 * q] = fmaf(wf[e], r4.x, acc[4 * q]);
            acc[4 * q + 1] = fmaf(wf[e], r4.y, acc[4 * q + 1]);
            acc[4 * q + 2] = fmaf(wf[e], r4.z, acc[4 * q + 2]);
            acc[4 * q + 3] = fmaf(wf[e], r4.w, acc[4 * q + 3]);
          }
        }
      } else {
#pragma unroll
        for (int t = 0; t < kT; ++t) {
          if (t >= p.T) break;
          float rv[kVec];
          load_floats<kVec>(p.r + t * p.rank + v * kVec, rv);
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[t] = fmaf(wf[e], rv[e], acc[t]);
        }
      }
    }
  }
  // The 8 lanes of a row are aligned groups of a warp: xor 1, 2, 4 stays inside the group.
#pragma unroll
  for (int t = 0; t < kT; ++t)
#pragma unroll
    for (int o = 1; o < kLanesPerRow; o <<= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
  cluster_wait_acquire();  // phase 1: every CTA of the cluster has started
  if (sub == 0) {
    const unsigned prod = cluster_rank_addr(&prod_all[sid][c], 0), bar = cluster_rank_addr(&prod_bar, 0);
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      if (t >= p.T) break;
      const float xn = __fmul_rn(__fmul_rn(xv[t], ir[t]), nw);
      const float v = __fmul_rn(sigmoid_f(acc[t]), xn);
      if (sid == 0) {
        prod_all[0][t * kPostCols + c] = v;
      } else {
        cluster_push(prod + t * kPostCols * sizeof(float), v, bar);
      }
    }
  }
  if (sid != 0) return;
  cluster_push_wait(&prod_bar);  // the other streams' products are in
  __syncthreads();               // and this stream's, stored by other threads of the CTA
  post_finish(p, blk, prod_all, ublk);
#endif
}

// ---- hc_post with a warp's rows blocked in each lane (windows of 2 to 4 rows) --------------------
//
// hc_post_kernel gives each thread one row of up, 8 lanes splitting its K, so every value of r a
// lane reads feeds that one row: at T = 4, 40 shared-memory loads of 16 bytes a lane, and its dot
// loop waits on the L1 / shared return path (one register a lane per cycle), which the 4 x 160
// FMAs a lane do not fill. Here warp w takes the block's rows 4w .. 4w + 3 (the CTA's 32, as
// there) and its 32 lanes split K, rank / 32 values each (10 at rank 320), so each value of r a
// lane reads serves 4 rows: at rank 320 and T = 4 a lane loads 5 x 4 8-byte pairs of r (the staged
// rows, [t][k]: lanes 10 words apart, conflict-free) and its weights as 5 32-bit words a row. The
// lanes' 4 x T sums are reduced by a transposing butterfly (warp_fold_sums: 16 shuffles at T = 4
// where one warp_sum each would take 80), and lane 32 / (4 T) * i ends with sum i, the product of
// its row and window row. The rest, the streams' products into rank 0 and u with its q8_1 block,
// is hc_post_kernel's.
[[maybe_unused]] constexpr int kBlockedRows = 4;  // rows of up a warp takes (a lane holds all four)
constexpr int kBlockedMaxWords = 8;  // 32-bit words of one row a lane holds: rank <= 512

// Sums v[i] over the warp's lanes for all kN values at once (kN a power of 2, at most 32): each
// step exchanges half of the values still held with the lane `o` apart and keeps the other
// half, so after log2(kN) steps a lane holds one value's partial sum, which the remaining steps
// sum over the lanes that hold the same value. Returns the total of value lane >> (5 - log2 kN)
// (held by 32 / kN lanes); the order of the additions depends only on the lane, as warp_sum's.
template <int kN, int kO = 16>
__device__ __forceinline__ float warp_fold_sums(float (&v)[kN], int lane) {
  static_assert(kN >= 1 && kN <= 32 && (kN & (kN - 1)) == 0, "a power of 2 up to 32 values");
  if constexpr (kN == 1) {
    float s = v[0];
#pragma unroll
    for (int o = kO; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
  } else {
    const bool upper = (lane & kO) != 0;
    float h[kN / 2];
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) {
      const float send = upper ? v[i] : v[i + kN / 2];
      const float keep = upper ? v[i + kN / 2] : v[i];
      h[i] = keep + __shfl_xor_sync(0xffffffffu, send, kO);
    }
    return warp_fold_sums<kN / 2, kO / 2>(h, lane);
  }
}

template <quant::Type WT, int kT>
__global__ void __launch_bounds__(kPostThreads) hc_post_blocked_kernel(const HcPostParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // thread-block clusters need sm_90; hc_fused_supported() keeps older devices off this path
#else
  static_assert(kPostThreads / 32 * kBlockedRows == kPostCols, "the CTA's warps cover its block's rows");
  constexpr int kN = kBlockedRows * kT;         // sums a lane holds: [row][t]
  constexpr int kLanesPerSum = 32 / kN;         // lanes holding each total after warp_fold_sums
  static_assert(kN <= 32, "at most 32 sums a lane");
  __shared__ float prod_all[kMaxClusterStreams][kMaxWindowRows * kPostCols];  // rank 0's: stream k's sigmoid(g) * xn
  __shared__ __align__(16) float ublk[kMaxWindowRows][kPostCols];
  __shared__ uint64_t prod_bar;  // rank 0's: counts the bytes pushed into prod_all
  extern __shared__ float4 rs4[];  // [kT][rank]: r, rows past p.T zero
  const float* rs = reinterpret_cast<const float*>(rs4);
  const cg::cluster_group cluster = cg::this_cluster();
  const int sid = static_cast<int>(cluster.block_rank());
  if (sid == 0 && threadIdx.x == 0) cluster_push_init(&prod_bar, (p.S - 1) * p.T * kPostCols * sizeof(float));
  cluster_arrive_relaxed();  // phase 1
  const int blk = static_cast<int>(blockIdx.x) / p.S;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int words = p.rank / 64;  // 32-bit words (two weights) of a row a lane holds
  const int64_t wide = static_cast<int64_t>(p.S) * p.H;
  const int64_t first_row = static_cast<int64_t>(sid) * p.H + static_cast<int64_t>(blk) * kPostCols;
  const int c0 = warp * kBlockedRows;  // the warp's first row of the block
  // The sum this lane ends with (warp_fold_sums): row c0 + mine / kT, window row mine % kT.
  const int mine = lane / kLanesPerSum, my_c = c0 + mine / kT, my_t = mine % kT;
  const bool pushes = lane % kLanesPerSum == 0 && my_t < p.T;
  const int64_t my_col = first_row + my_c;  // its column of the wide row

  pdl_launch_dependents();
  uint32_t w[kBlockedRows][kBlockedMaxWords];
#pragma unroll
  for (int r = 0; r < kBlockedRows; ++r) {
    const auto* row = reinterpret_cast<const uint32_t*>(p.up + (first_row + c0 + r) * p.row_bytes) + lane * words;
#pragma unroll
    for (int i = 0; i < kBlockedMaxWords; ++i) w[r][i] = i < words ? __ldcs(row + i) : 0u;  // pdl-pre-wait: weights
  }
  const float nw = pushes ? __ldg(p.norm + my_col) : 0.0f;  // pdl-pre-wait: weight
  pdl_wait();
  // xn's operands, requested now so that they arrive during the dots.
  const float xv = pushes ? __ldcg(p.x + my_t * wide + my_col) : 0.0f;
  const float ir = pushes ? __ldcg(p.inv_rms + my_t * p.S + sid) : 0.0f;

  // r (p.T rows of rank, written by hc_pre) into shared memory, zeros past p.T: every load of a
  // thread issued before any store.
  {
    const int quads = p.rank / 4, n = kT * quads;
    const auto* r4 = reinterpret_cast<const float4*>(p.r);
    for (int base = threadIdx.x; base < n; base += kPostThreads * 4) {
      float4 v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int q = base + j * kPostThreads;
        v[j] = q < n && q / quads < p.T ? __ldcg(r4 + q) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int q = base + j * kPostThreads;
        if (q < n) rs4[q] = v[j];
      }
    }
    __syncthreads();
  }

  float acc[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) acc[i] = 0.0f;
  const int k0 = lane * 2 * words;  // this lane's first k
#pragma unroll
  for (int i = 0; i < kBlockedMaxWords; ++i) {
    if (i >= words) break;
    float2 rv[kT];
#pragma unroll
    for (int t = 0; t < kT; ++t) rv[t] = *reinterpret_cast<const float2*>(rs + t * p.rank + k0 + 2 * i);
#pragma unroll
    for (int r = 0; r < kBlockedRows; ++r) {
      float wf[2];
      weight_pair_floats<WT>(w[r][i], wf);
#pragma unroll
      for (int t = 0; t < kT; ++t) {
        acc[r * kT + t] = fmaf(wf[0], rv[t].x, acc[r * kT + t]);
        acc[r * kT + t] = fmaf(wf[1], rv[t].y, acc[r * kT + t]);
      }
    }
  }
  const float g = warp_fold_sums<kN>(acc, lane);
  cluster_wait_acquire();  // phase 1: every CTA of the cluster has started
  if (pushes) {
    const float xn = __fmul_rn(__fmul_rn(xv, ir), nw);
    const float v = __fmul_rn(sigmoid_f(g), xn);
    if (sid == 0) {
      prod_all[0][my_t * kPostCols + my_c] = v;
    } else {
      cluster_push(cluster_rank_addr(&prod_all[sid][my_t * kPostCols + my_c], 0), v, cluster_rank_addr(&prod_bar, 0));
    }
  }
  if (sid != 0) return;
  cluster_push_wait(&prod_bar);  // the other streams' products are in
  __syncthreads();               // and this stream's, stored by other threads of the CTA
  post_finish(p, blk, prod_all, ublk);
#endif
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

// Whether the float ranges [a, a + na) and [b, b + nb) share an element.
bool overlaps(const float* a, int64_t na, const float* b, int64_t nb) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + static_cast<uintptr_t>(nb) * sizeof(float) && pb < pa + static_cast<uintptr_t>(na) * sizeof(float);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kEltThreads - 1) / kEltThreads); }

// Thread-block clusters need compute capability 9.0.
bool clusters_supported() { return device_cc_major_at_least(9); }

bool hc_float_type(quant::Type t) { return t == quant::Type::F32 || t == quant::Type::F16 || t == quant::Type::BF16; }

int64_t float_type_bytes(quant::Type t) { return t == quant::Type::F32 ? 4 : 2; }

// Why (S, H, rank) cannot take the fused path; empty when it can.
std::string geometry_mismatch(int S, int H, int rank) {
  if (!clusters_supported()) return "the device has no thread-block clusters (compute capability < 9.0)";
  if (S < 1 || S > kMaxClusterStreams) return "S must be in [1, 8] (one cluster CTA per stream), got " + std::to_string(S);
  if (H < 32 || H % 32 != 0) return "H must be a positive multiple of 32 (q8_1 blocks of u), got " + std::to_string(H);
  if (rank < 8 || rank % 8 != 0) return "rank must be a positive multiple of 8, got " + std::to_string(rank);
  // hc_pre stages T rows of H floats, hc_post T rows of rank, in shared memory (T up to 8).
  if (H > kMaxStagedFloats) return "H must be at most " + std::to_string(kMaxStagedFloats) + ", got " + std::to_string(H);
  if (rank > kMaxStagedFloats) return "rank must be at most " + std::to_string(kMaxStagedFloats) + ", got " + std::to_string(rank);
  return {};
}

// Why w is not a packed, 16-byte aligned float matrix of rows x cols; empty when it is.
std::string matrix_mismatch(const char* name, const DTensor& w, int64_t rows, int64_t cols) {
  if (!w) return std::string(name) + " must be set";
  if (!hc_float_type(w.type)) return std::string(name) + " must be F32, F16 or BF16";
  if (w.rows != rows || w.cols != cols || w.row_bytes != cols * float_type_bytes(w.type))
    return std::string(name) + " must be a packed [" + std::to_string(rows) + ", " + std::to_string(cols) + "], got [" +
           std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] with rows of " + std::to_string(w.row_bytes) +
           " bytes";
  if (!aligned16(w.data)) return std::string(name) + " must be 16-byte aligned";
  return {};
}

std::string pre_mismatch(const DTensor& down, const DTensor& inject, int S, int H, int rank) {
  std::string why = geometry_mismatch(S, H, rank);
  const int64_t wide = static_cast<int64_t>(S) * H;
  if (why.empty()) why = matrix_mismatch("down", down, rank, wide);
  if (why.empty() && inject) why = matrix_mismatch("inject", inject, S, wide);
  if (why.empty() && inject && inject.type != down.type) why = "inject must have down's type";
  return why;
}

std::string post_mismatch(const DTensor& up, int S, int H, int rank) {
  std::string why = geometry_mismatch(S, H, rank);
  if (why.empty()) why = matrix_mismatch("up", up, static_cast<int64_t>(S) * H, rank);
  return why;
}


// The kernels keep per-thread sums for kT rows, kT = T rounded up to 1, 2, 4 or 8: T = 1 (every
// decode step) then needs few registers and several CTAs fit on an SM.
// Dynamic shared memory above the default 48 KB needs the kernel's opt-in (X at T = 8 and
// H = 2560 is 80 KB).
template <typename Kernel>
cudaError_t launch_staged(Kernel kernel, dim3 grid, dim3 block, size_t smem, unsigned cluster, Stream stream,
                          const auto& p) {
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  return launch_kernel_clustered(kernel, grid, block, smem, cluster, stream, p);
}

template <quant::Type WT, int kT>
cudaError_t launch_pre_t(const HcPreParams& p, Stream stream) {
  const unsigned groups = static_cast<unsigned>((p.n_out + kPreRows<kT> - 1) / kPreRows<kT>);
  const dim3 grid(groups * static_cast<unsigned>(p.S)), block(kPreThreads);
  const size_t smem = kPreStaged<kT> ? static_cast<size_t>(p.T) * p.H * sizeof(float) : 0;
  return launch_staged(hc_pre_kernel<WT, kT>, grid, block, smem, static_cast<unsigned>(p.S), stream, p);
}

template <quant::Type WT>
cudaError_t launch_pre(const HcPreParams& p, Stream stream) {
  if (p.T == 1) return launch_pre_t<WT, 1>(p, stream);
  if (p.T == 2) return launch_pre_t<WT, 2>(p, stream);
  if (p.T <= 4) return launch_pre_t<WT, 4>(p, stream);
  return launch_pre_t<WT, kMaxWindowRows>(p, stream);
}

// Whether hc_post_blocked_kernel takes a window of T rows with these weights: 2 to 4 rows
// (STRATA_HC_POST_BLOCKED; at 8 its 32 sums a lane would need 128 registers, two CTAs an SM),
// 16-bit weights, and a rank that gives every lane whole 32-bit words of a row, at most
// kBlockedMaxWords.
bool takes_blocked(const HcPostParams& p, quant::Type type) {
  return switches().hc_post_blocked && p.T > 1 && p.T <= 4 && type != quant::Type::F32 && p.rank % 64 == 0 &&
         p.rank / 64 <= kBlockedMaxWords;
}

template <quant::Type WT>
cudaError_t launch_post(const HcPostParams& p, unsigned blocks, Stream stream) {
  const dim3 grid(blocks * static_cast<unsigned>(p.S)), block(kPostThreads);
  const unsigned cluster = static_cast<unsigned>(p.S);
  if constexpr (WT != quant::Type::F32) {
    if (takes_blocked(p, WT)) {
      const size_t rows = p.T == 2 ? 2 : 4;  // the form's kT: r staged with zeros past p.T
      const size_t smem = rows * static_cast<size_t>(p.rank) * sizeof(float);
      if (p.T == 2) return launch_staged(hc_post_blocked_kernel<WT, 2>, grid, block, smem, cluster, stream, p);
      return launch_staged(hc_post_blocked_kernel<WT, 4>, grid, block, smem, cluster, stream, p);
    }
  }
  // kStagedRows only: r as [rank][kT] floats, kT the form's row count (4 or kMaxWindowRows).
  // (r_slot permutes inside aligned groups of 8 float4s: whole groups are allocated.)
  const size_t groups = (static_cast<size_t>(p.rank) + 7) / 8;
  const size_t smem4 = groups * 8 * 4 * sizeof(float);
  const size_t smem8 = groups * 8 * kMaxWindowRows * sizeof(float);
  if (p.T == 1) return launch_staged(hc_post_kernel<WT, 1>, grid, block, 0, cluster, stream, p);
  if (p.T == 2) return launch_staged(hc_post_kernel<WT, 2>, grid, block, 0, cluster, stream, p);
  if (p.T <= 4) return launch_staged(hc_post_kernel<WT, 4>, grid, block, smem4, cluster, stream, p);
  return launch_staged(hc_post_kernel<WT, kMaxWindowRows>, grid, block, smem8, cluster, stream, p);
}


}  // namespace

Status hc_norm(const float* x, const float* w, int T, int S, int H, float eps, float* xn, Stream stream) {
  STRATA_TRY(check_rows("hc_norm", T, S, H));
  if (!x || !w || !xn) return fail("hc_norm", "x, w and xn must be non-null");
  if (T > 65535) return fail("hc_norm", "T exceeds the grid's y limit");
  const dim3 grid(static_cast<unsigned>(S), static_cast<unsigned>(T));
  if (H % 4 == 0 && aligned16(x) && aligned16(w) && aligned16(xn)) {
    STRATA_CUDA_TRY(launch_kernel(hc_norm_kernel<true>, grid, dim3(kNormThreads), 0, stream, x, w, S, H, eps, xn));
  } else {
    STRATA_CUDA_TRY(launch_kernel(hc_norm_kernel<false>, grid, dim3(kNormThreads), 0, stream, x, w, S, H, eps, xn));
  }
  return Status::ok_status();
}

Status hc_down_act(float* d, int T, int rank, int S, Stream stream) {
  STRATA_TRY(check_rows("hc_down_act", T, S, rank));
  if (!d) return fail("hc_down_act", "d must be non-null");
  const int n = T * rank;
  STRATA_CUDA_TRY(launch_kernel(hc_down_act_kernel, dim3(blocks_for(n)), dim3(kEltThreads), 0, stream, d, n,
                                static_cast<float>(S)));
  return Status::ok_status();
}

Status hc_gate_mean(const float* g, const float* xn, const float* a, int T, int S, int H, float* u, float* alpha,
                    Stream stream) {
  STRATA_TRY(check_rows("hc_gate_mean", T, S, H));
  if (!g || !xn || !u) return fail("hc_gate_mean", "g, xn and u must be non-null");
  if (a && !alpha) return fail("hc_gate_mean", "alpha must be non-null when a (the inject logits) is given");
  if (a && S > H) return fail("hc_gate_mean", "S must be <= H (alpha is written by the first S threads of a row)");
  STRATA_CUDA_TRY(launch_kernel(hc_gate_mean_kernel, dim3(blocks_for(static_cast<int64_t>(T) * H)), dim3(kEltThreads), 0,
                                stream, g, xn, a, T, S, H, u, alpha));
  return Status::ok_status();
}

bool hc_fused_supported(const DTensor& down, const DTensor& up, const DTensor& inject, int S, int H, int rank) {
  return pre_mismatch(down, inject, S, H, rank).empty() && post_mismatch(up, S, H, rank).empty();
}

Status hc_pre(const HcPreArgs& a, Stream stream) {
  STRATA_TRY(check_rows("hc_pre", a.T, a.S, a.H));
  if (const std::string why = pre_mismatch(a.down, a.inject, a.S, a.H, a.rank); !why.empty()) return fail("hc_pre", why);
  if (!a.x || !a.norm || !a.r || !a.inv_rms || (a.inject && !a.alpha))
    return fail("hc_pre", "x, norm, r, inv_rms (and alpha with inject) must be non-null");
  if (!aligned16(a.x) || !aligned16(a.norm)) return fail("hc_pre", "x and norm must be 16-byte aligned");
  if (a.y) {
    if (!a.alpha_prev || !a.x_out) return fail("hc_pre", "a folded combine (y) needs alpha_prev and x_out");
    if (!aligned16(a.y) || !aligned16(a.x_out)) return fail("hc_pre", "y and x_out must be 16-byte aligned");
    const int64_t n = static_cast<int64_t>(a.T) * a.S * a.H;
    if (overlaps(a.x, n, a.x_out, n)) return fail("hc_pre", "x_out must not overlap x (other CTAs still read x)");
    if (a.inject && overlaps(a.alpha_prev, int64_t{a.T} * a.S, a.alpha, int64_t{a.T} * a.S))
      return fail("hc_pre", "alpha must not overlap alpha_prev (other CTAs still read alpha_prev)");
  }
  HcPreParams p{};
  p.x = a.x;
  p.norm = a.norm;
  p.down = static_cast<const uint8_t*>(a.down.data);
  p.inject = a.inject ? static_cast<const uint8_t*>(a.inject.data) : nullptr;
  p.row_bytes = a.down.row_bytes;
  p.T = a.T;
  p.S = a.S;
  p.H = a.H;
  p.rank = a.rank;
  p.n_out = a.rank + (a.inject ? a.S : 0);
  p.eps = a.eps;
  p.r = a.r;
  p.alpha = a.alpha;
  p.inv_rms = a.inv_rms;
  p.y = a.y;
  p.alpha_prev = a.alpha_prev;
  p.x_out = a.x_out;
  switch (a.down.type) {  // a float type: the mismatch check above refused the others
    case quant::Type::F32: STRATA_CUDA_TRY(launch_pre<quant::Type::F32>(p, stream)); break;
    case quant::Type::F16: STRATA_CUDA_TRY(launch_pre<quant::Type::F16>(p, stream)); break;
    default: STRATA_CUDA_TRY(launch_pre<quant::Type::BF16>(p, stream)); break;
  }
  return Status::ok_status();
}

Status hc_post(const HcPostArgs& a, Stream stream) {
  STRATA_TRY(check_rows("hc_post", a.T, a.S, a.H));
  if (const std::string why = post_mismatch(a.up, a.S, a.H, a.rank); !why.empty()) return fail("hc_post", why);
  if (!a.x || !a.norm || !a.inv_rms || !a.r || !a.u) return fail("hc_post", "x, norm, inv_rms, r and u must be non-null");
  if (!aligned16(a.r)) return fail("hc_post", "r must be 16-byte aligned");
  if (a.u_q8 && (reinterpret_cast<uintptr_t>(a.u_q8) % 4 != 0 || a.u_q8_stride % 4 != 0 ||
                 a.u_q8_stride < static_cast<int64_t>(a.H) / 32 * 36))
    return fail("hc_post", "u_q8 must be 4-byte aligned with a stride of a multiple of 4 bytes >= " +
                               std::to_string(a.H / 32 * 36) + " (stride " + std::to_string(a.u_q8_stride) + ")");
  HcPostParams p{};
  p.x = a.x;
  p.norm = a.norm;
  p.inv_rms = a.inv_rms;
  p.r = a.r;
  p.up = static_cast<const uint8_t*>(a.up.data);
  p.row_bytes = a.up.row_bytes;
  p.T = a.T;
  p.S = a.S;
  p.H = a.H;
  p.rank = a.rank;
  p.u = a.u;
  p.u_q8 = static_cast<uint8_t*>(a.u_q8);
  p.q8_stride = a.u_q8_stride;
  const unsigned blocks = static_cast<unsigned>(a.H / kPostCols);
  switch (a.up.type) {  // a float type: the mismatch check above refused the others
    case quant::Type::F32: STRATA_CUDA_TRY(launch_post<quant::Type::F32>(p, blocks, stream)); break;
    case quant::Type::F16: STRATA_CUDA_TRY(launch_post<quant::Type::F16>(p, blocks, stream)); break;
    default: STRATA_CUDA_TRY(launch_post<quant::Type::BF16>(p, blocks, stream)); break;
  }
  return Status::ok_status();
}

Status hc_combine(float* x, const float* y, const float* alpha, int T, int S, int H, Stream stream) {
  STRATA_TRY(check_rows("hc_combine", T, S, H));
  if (!x || !y || !alpha) return fail("hc_combine", "x, y and alpha must be non-null");
  const int n = T * S * H;
  STRATA_CUDA_TRY(launch_kernel(hc_combine_kernel, dim3(blocks_for(n)), dim3(kEltThreads), 0, stream, x, y, alpha, S, H, n, x));
  return Status::ok_status();
}

Status hc_broadcast(const float* e, int T, int S, int H, float* x, Stream stream) {
  STRATA_TRY(check_rows("hc_broadcast", T, S, H));
  if (!e || !x) return fail("hc_broadcast", "e and x must be non-null");
  const int n = T * S * H;
  STRATA_CUDA_TRY(launch_kernel(hc_broadcast_kernel, dim3(blocks_for(n)), dim3(kEltThreads), 0, stream, e, S, H, n, x));
  return Status::ok_status();
}

Status add_inplace(float* y, const float* x, int64_t n, Stream stream) {
  if (n < 0) return fail("add_inplace", "n must be >= 0, got " + std::to_string(n));
  if (n == 0) return Status::ok_status();
  if (!y || !x) return fail("add_inplace", "y and x must be non-null");
  // A grid-stride loop: a few CTAs per SM cover any n without a huge grid.
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(blocks_for(n), 4096));
  STRATA_CUDA_TRY(launch_kernel(add_inplace_kernel, dim3(blocks), dim3(kEltThreads), 0, stream, y, x, n));
  return Status::ok_status();
}

}  // namespace strata::cuda
