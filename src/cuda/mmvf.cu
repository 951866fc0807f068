// mmvf_decode_kernel: F32 / F16 / BF16 weights times T <= 8 f32 activation rows (no quantization
// of the activations, fp32 FMA). Used for the float matrices of a pack: HC up (10240 x 320) and
// down (320 x 10240), inject (4 x 10240), routers (512 x 2560), GDN beta/alpha (48 x 2560).
//
// Shape of the work
//   * A row is read by a team of L lanes (L a power of two, 1 .. 256): team lane i takes the
//     16-byte weight vectors i, i + L, i + 2L, ... of the row, kUnroll of them loaded before any
//     is used, so every thread keeps kUnroll 16-byte loads in flight. Each weight vector is
//     converted once and multiplied into all T activation rows.
//   * L is picked per shape (plan_float): short rows (K = 320: 40 vectors) get small teams, so
//     one warp reads several rows at once instead of leaving most lanes idle; long rows (K =
//     10240) get a whole CTA per row, so a few rows still spread over many SMs and every thread
//     holds only a few vectors. L never depends on T, so a row's summation order is the same at
//     every window size.
//   * The team's partial sums are reduced in a fixed order: xor-shuffles inside a warp (the same
//     pairing every launch), then, for teams wider than a warp, the warps' sums through shared
//     memory in warp order. No atomics: results are deterministic run to run.
//   * PDL (launch.cuh): before pdl_wait() the CTA's weight rows are prefetched toward L2 and each
//     lane's first kUnroll weight vectors (for the decode shapes, all of its share) are loaded into
//     registers, so the weight stream starts while the previous kernel of the window drains;
//     activations are read and y written only after it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "float_weights.cuh"
#include "launch.cuh"
#include "mmvq.cuh"

namespace strata::cuda::mmvq_detail {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 8;        // 16-byte weight loads in flight per thread
constexpr int kMaxTeamLog2 = 8;   // a team is at most the whole CTA

// acc[t] += w . x_t over one 16-byte weight vector v (kPerVec elements) for the T window rows.
template <Type WT, int kPerVec>
__device__ __forceinline__ void fma_vector(const Shape& p, const uint4 raw, int v, float (&acc)[kMaxWindowRows]) {
  float w[kPerVec];
  weight_floats<WT>(raw, w);
#pragma unroll
  for (int t = 0; t < kMaxWindowRows; ++t) {
    if (t >= p.T) break;
    const float4* xp = reinterpret_cast<const float4*>(p.act + t * p.act_stride) + v * (kPerVec / 4);
#pragma unroll
    for (int k = 0; k < kPerVec / 4; ++k) {
      const float4 xv = __ldg(xp + k);
      acc[t] = fmaf(w[4 * k], xv.x, acc[t]);
      acc[t] = fmaf(w[4 * k + 1], xv.y, acc[t]);
      acc[t] = fmaf(w[4 * k + 2], xv.z, acc[t]);
      acc[t] = fmaf(w[4 * k + 3], xv.w, acc[t]);
    }
  }
}

// Launched with kThreads threads; team_log2 = log2(L). CTA b owns rows b * (kThreads / L) ...
template <Type WT>
__global__ void __launch_bounds__(kThreads) mmvf_decode_kernel(const Shape p, const int team_log2) {
  constexpr int kPerVec = kWeightsPerVec<WT>;
  __shared__ float red[kWarps][kMaxWindowRows];
  pdl_launch_dependents();

  const int team = 1 << team_log2;
  const int rows_per_cta = kThreads >> team_log2;
  const int cta_row0 = static_cast<int>(blockIdx.x) * rows_per_cta;
  {
    const int n = p.rows - cta_row0 < rows_per_cta ? p.rows - cta_row0 : rows_per_cta;
    if (n > 0) prefetch_l2(p.w + static_cast<int64_t>(cta_row0) * p.row_bytes, static_cast<int64_t>(n) * p.row_bytes);
  }

  const int tl = static_cast<int>(threadIdx.x) & (team - 1);  // lane within the team
  const int row = cta_row0 + (static_cast<int>(threadIdx.x) >> team_log2);
  const bool live = row < p.rows;
  const int nvec = static_cast<int>(p.row_bytes / 16);
  const uint4* wrow = reinterpret_cast<const uint4*>(p.w + static_cast<int64_t>(live ? row : 0) * p.row_bytes);

  float acc[kMaxWindowRows];
#pragma unroll
  for (int t = 0; t < kMaxWindowRows; ++t) acc[t] = 0.0f;

  // The lane's first kUnroll weight vectors are loaded before pdl_wait() (weights only): with
  // at most kUnroll vectors per lane (plan_float) that is the lane's whole share, so the weight
  // stream overlaps the previous kernel's tail and only the activations wait for it.
  uint4 raw[kUnroll];
  const auto load_batch = [&](int v0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = v0 + u * team;
      raw[u] = v < nvec ? __ldcs(wrow + v) : make_uint4(0, 0, 0, 0);
    }
  };
  if (live) load_batch(tl);  // pdl-pre-wait: weights
  pdl_wait();  // activations are written by the previous kernels of the window
  if (live) {
    for (int v0 = tl; v0 < nvec; v0 += kUnroll * team) {
      if (v0 != tl) load_batch(v0);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int v = v0 + u * team;
        if (v < nvec) fma_vector<WT, kPerVec>(p, raw[u], v, acc);
      }
    }
  }

  // Team sum, fixed order: xor-shuffles over the team's lanes inside the warp, then (teams wider
  // than a warp) the team's warps in order. Shuffles run on every lane (dead rows carry zeros).
  const int in_warp = team < 32 ? team : 32;
#pragma unroll
  for (int t = 0; t < kMaxWindowRows; ++t) {
    if (t >= p.T) break;
    for (int off = in_warp >> 1; off > 0; off >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], off);
  }
  if (team <= 32) {
    if (tl == 0 && live)
      for (int t = 0; t < p.T; ++t) p.y[t * p.y_stride + row] = acc[t];
    return;
  }
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  if (lane == 0)
    for (int t = 0; t < p.T; ++t) red[warp][t] = acc[t];
  __syncthreads();
  const int warps_per_team = team >> 5;
  if (tl < p.T && live) {  // team lane t writes window row t
    const int w0 = warp - (warp & (warps_per_team - 1));
    float s = 0.0f;
    for (int w = 0; w < warps_per_team; ++w) s += red[w0 + w][tl];
    p.y[tl * p.y_stride + row] = s;
  }
}

template <Type WT>
Status launch_typed(const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  int team_log2 = 0;
  while ((1 << team_log2) < plan.ksplit) ++team_log2;
  STRATA_CUDA_TRY(launch_kernel(&mmvf_decode_kernel<WT>, dim3(static_cast<unsigned>(plan.grid)), dim3(kThreads), 0, stream, p, team_log2));
  return Status::ok_status();
}

const void* float_kernel(Type type) {
  switch (type) {
    case Type::F32: return reinterpret_cast<const void*>(&mmvf_decode_kernel<Type::F32>);
    case Type::F16: return reinterpret_cast<const void*>(&mmvf_decode_kernel<Type::F16>);
    case Type::BF16: return reinterpret_cast<const void*>(&mmvf_decode_kernel<Type::BF16>);
    default: return nullptr;
  }
}

}  // namespace

// Team size L (lanes per row) for a float mat-vec, from the shape alone (never from T):
//   1. the smallest power of two with at most kUnroll vectors per lane, so a lane's loads of a
//      row are all in flight together (HC up, K = 320 = 40 BF16 vectors: L = 8, 32 rows per CTA,
//      320 CTAs; HC down / inject, K = 10240 = 1280 vectors: L = 256, one row per CTA, 5 loads
//      per lane);
//   2. then, while the grid is below 1.5 CTAs per SM and a lane still has a vector, double L:
//      latency-bound shapes spread over more SMs with fewer loads each (the router's 513 x 2560:
//      L = 128, 257 CTAs of 2 rows; 48 x 2560: 48 CTAs; 4 x 10240: 4 CTAs, one round trip of 5
//      loads per lane). Every CTA reads the window's activations once per row it holds, so one
//      row per CTA (the bound at 2 CTAs per SM: the router as 513 CTAs) doubles that traffic:
//      the T = 4 window took 8.028 ms against 7.898 at 1.5 (H100, bench/ab-run.sh); T = 1 the
//      same (4.659 / 4.658 ms). At 0.75 (the router as 129 CTAs of 4 rows) it took 7.919
//      against 7.764 (bench/results/2026-12-06-h100-gdn-commit).
// Bytes in flight: HC up 320 CTAs x 256 lanes x 5 x 16 B = 6.5 MB, the whole matrix requested in
// one wave (2.4 CTAs of 256 threads per SM); HC down 320 CTAs x 256 x 5 x 16 B likewise. Both are
// then bound by HBM (~1.5 us at 4.5 TB/s) plus one latency and the launch, about 2.5-3 us, not by
// per-warp latency as before (HC up: one warp per row, 8 of 32 lanes busy per load; HC down: 80
// CTAs looping over 4 rows).
Result<MmvqPlan> plan_float(Type type, const Shape& p, const DeviceCaps& caps) {
  const void* kernel = float_kernel(type);
  if (kernel == nullptr) return Status::error("cuda: mmvq: no float kernel for type id " + std::to_string(static_cast<uint32_t>(type)));
  auto occ = occupancy(kernel, kThreads, 0, caps);
  if (!occ) return occ.status();
  const int64_t nvec = p.row_bytes / 16;
  int team_log2 = 0;
  while (team_log2 < kMaxTeamLog2 && (int64_t{1} << team_log2) * kUnroll < nvec) ++team_log2;
  const auto ctas = [&](int lg) { return (static_cast<int64_t>(p.rows) + (kThreads >> lg) - 1) / (kThreads >> lg); };
  while (team_log2 < kMaxTeamLog2 && ctas(team_log2) < 3 * static_cast<int64_t>(caps.sm_count) / 2 && (int64_t{2} << team_log2) <= nvec)
    ++team_log2;
  MmvqPlan plan;
  plan.kernel = "mmvf_decode_kernel";
  plan.threads = kThreads;
  plan.grid = static_cast<int>(ctas(team_log2));
  plan.ksplit = 1 << team_log2;  // lanes per row
  plan.rows_per_tile = kThreads >> team_log2;
  plan.ctas_per_sm = *occ;
  plan.smem_bytes = 0;
  return plan;
}

Status launch_float(Type type, const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  switch (type) {
    case Type::F32: return launch_typed<Type::F32>(p, plan, stream);
    case Type::F16: return launch_typed<Type::F16>(p, plan, stream);
    case Type::BF16: return launch_typed<Type::BF16>(p, plan, stream);
    default: return Status::error("cuda: mmvq: no float kernel for type id " + std::to_string(static_cast<uint32_t>(type)));
  }
}

}  // namespace strata::cuda::mmvq_detail
