// mmvf_decode_kernel: F32 / F16 / BF16 weights times T <= 8 f32 activation rows (no quantization
// of the activations, fp32 FMA). A CTA owns kRows consecutive rows and all 256 threads split K in
// 16-byte weight vectors (coalesced streaming loads); each activation vector read feeds kRows rows.
// Per-thread partial sums are reduced warp by warp and then across warps in a fixed order, so the
// result is deterministic. Used for the few float matrices of a pack (routers, small heads).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "mmvq.cuh"

namespace strata::cuda::mmvq_detail {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 4;

template <Type WT>
__device__ __forceinline__ void to_floats(const uint4 w, float* f) {
  if constexpr (WT == Type::F32) {
    f[0] = __uint_as_float(w.x);
    f[1] = __uint_as_float(w.y);
    f[2] = __uint_as_float(w.z);
    f[3] = __uint_as_float(w.w);
  } else {
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (WT == Type::F16) {
        f[2 * i] = qd::f16_bits_to_f32(u[i] & 0xFFFFu);
        f[2 * i + 1] = qd::f16_bits_to_f32(u[i] >> 16);
      } else {
        f[2 * i] = __uint_as_float(u[i] << 16);
        f[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
      }
    }
  }
}

template <Type WT>
__global__ void __launch_bounds__(kThreads) mmvf_decode_kernel(const Shape p) {
  constexpr int kPerVec = WT == Type::F32 ? 4 : 8;  // elements per 16-byte weight vector
  __shared__ float red[kWarps][kRows][kMaxWindowRows];
  const int nvec = p.nchunks * 32 / kPerVec;
  const int r0 = blockIdx.x * kRows;

  float acc[kRows][kMaxWindowRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kMaxWindowRows; ++t) acc[r][t] = 0.0f;

  for (int v = threadIdx.x; v < nvec; v += kThreads) {
    float w[kRows][kPerVec];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      uint4 raw = make_uint4(0, 0, 0, 0);
      if (r0 + r < p.rows) raw = __ldcs(reinterpret_cast<const uint4*>(p.w + (r0 + r) * p.row_bytes) + v);
      to_floats<WT>(raw, w[r]);
    }
#pragma unroll
    for (int t = 0; t < kMaxWindowRows; ++t) {
      if (t >= p.T) break;
      const float4* xp = reinterpret_cast<const float4*>(p.act + t * p.act_stride) + v * (kPerVec / 4);
      float x[kPerVec];
#pragma unroll
      for (int k = 0; k < kPerVec / 4; ++k) {
        const float4 xv = __ldg(xp + k);
        x[4 * k] = xv.x;
        x[4 * k + 1] = xv.y;
        x[4 * k + 2] = xv.z;
        x[4 * k + 3] = xv.w;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int e = 0; e < kPerVec; ++e) acc[r][t] = fmaf(w[r][e], x[e], acc[r][t]);
    }
  }

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kMaxWindowRows; ++t) {
      if (t >= p.T) break;
      const float s = warp_sum(acc[r][t]);
      if (lane == 0) red[warp][r][t] = s;
    }
  __syncthreads();
  if (threadIdx.x < kRows * kMaxWindowRows) {
    const int r = threadIdx.x / kMaxWindowRows, t = threadIdx.x % kMaxWindowRows;
    if (t < p.T && r0 + r < p.rows) {
      float s = 0.0f;
      for (int w = 0; w < kWarps; ++w) s += red[w][r][t];
      p.y[t * p.y_stride + r0 + r] = s;
    }
  }
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

Result<MmvqPlan> plan_float(Type type, const Shape& p, const DeviceCaps& caps) {
  const void* kernel = float_kernel(type);
  if (kernel == nullptr) return Status::error("cuda: mmvq: no float kernel for type id " + std::to_string(static_cast<uint32_t>(type)));
  auto occ = occupancy(kernel, kThreads, 0, caps);
  if (!occ) return occ.status();
  MmvqPlan plan;
  plan.kernel = "mmvf_decode_kernel";
  plan.threads = kThreads;
  plan.grid = (p.rows + kRows - 1) / kRows;
  plan.ksplit = kWarps;
  plan.rows_per_tile = kRows;
  plan.ctas_per_sm = *occ;
  plan.smem_bytes = 0;
  return plan;
}

Status launch_float(Type type, const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  switch (type) {
    case Type::F32: mmvf_decode_kernel<Type::F32><<<plan.grid, kThreads, 0, stream>>>(p); break;
    case Type::F16: mmvf_decode_kernel<Type::F16><<<plan.grid, kThreads, 0, stream>>>(p); break;
    case Type::BF16: mmvf_decode_kernel<Type::BF16><<<plan.grid, kThreads, 0, stream>>>(p); break;
    default: return Status::error("cuda: mmvq: no float kernel for type id " + std::to_string(static_cast<uint32_t>(type)));
  }
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

}  // namespace strata::cuda::mmvq_detail
