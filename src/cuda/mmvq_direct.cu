// mmvq_direct_kernel: the register-direct mat-vec for the 256-element super-block types whose
// blocks are 8- or 16-byte aligned in every row (Q4_K, Q5_K, IQ4_XS), T = 1..3 q8_1 rows.
//
// Why a second kernel: mmvq_decode_kernel (mmvq.cuh) stages weights through shared memory and
// feeds int8 tensor cores; on the H200 its Q5_K launches issued ~133 instructions per 512
// weights (2.6 bytes of weights per warp instruction) and ran at ~1.1 TB/s even from L2, so
// decode was bound by instruction issue, not HBM (ncu, 2026-11-30: GDN qkvz 16384 x 2560 Q5_K,
// 24 us, 47% issue-slot busy, 3 warps per scheduler). Here every lane reads its weights into
// registers with 16-byte loads and multiplies with dp4a against activations that the CTA has
// unpacked once into shared memory; nothing is decoded twice, and a lane's scale and min are
// computed once per 32 weights. Q5_K at T = 1: about 120 instructions per
// lane for its 32 weights (3 loads, the nibble and high-bit decode, 8 dp4a, scales, the
// activation reads; counted in the SASS), ~5.9 bytes of weights per warp instruction; measured
// 9.2 us for 10240 x 2560 and 3.06 TB/s for 248320 x 2560 (bench/results/2026-11-30-h200-direct-mmvq).
//
// Shape of the work
//   * A *unit* is one lane's 32 weights of one block: two *halves* of 16 weights, each within one
//     32-element chunk (the span of one q8_1 activation block). K types: unit u = 8 b + 2 p + h of
//     row block b covers elements 16h .. 16h+15 of chunks 2p (the low nibbles of qs[32p + 16h ..])
//     and 2p+1 (their high nibbles). IQ4_XS: unit u = 8 b + j is chunk j, low nibbles elements
//     0..15 and high nibbles 16..31. Consecutive lanes take consecutive units, so a warp's loads
//     cover whole blocks.
//   * A row is owned by a group of G = 32, 16 or 8 lanes (the largest that divides the row's
//     units, so no lane idles), a warp by 32 / G rows at once. Each lane walks its units in
//     batches of kBatch whose loads are all issued before any is used (memory-level parallelism),
//     keeps T partial sums, and the group reduces them with shuffles in a fixed order.
//   * The CTA first unpacks the window's q8_1 rows into shared memory: the codes contiguous (one
//     16-byte load per half) and, per half, (d, d * sum of its 16 codes): the exact activation sum
//     the K types' min term needs (the reference dequantizes activations to d * q; d * sum is
//     exact in binary32: 11-bit codes sum times an f16 d).
//   * CTAs walk row sets grid-stride, the grid as many CTAs as fit resident at once (or fewer
//     when there are fewer row sets), so the act unpack is paid once per CTA rather than once
//     per row set.
//   * Each warp streams its row sets (32 / G contiguous rows) through its own shared-memory ring
//     of kRingStages stages, filled with 16-byte cp.async copies: the next sets' bytes are in
//     flight while the warp decodes one, and the first ones are requested before the PDL wait,
//     while the previous kernel drains. The lanes then read their units from shared memory.
//     Without the ring a warp had one batch of loads in flight at a time and waited on it at
//     each batch.
//   * Per half: y += (d_a * scale) * dot + min * (d_a * sum): the reference's products, summed in
//     another order (docs/PARITY.md bounds mmvq by relative error).
#include <algorithm>
#include <cstdint>

#include "common.cuh"
#include "launch.cuh"
#include "mmvq.cuh"
#include "mmvq_direct.h"

namespace strata::cuda::mmvq_detail {
namespace {

constexpr int kWarps = 4;      // per CTA
// Units per lane whose loads are in flight together: Unit<T>::kBatch. Measured on the H200 (Q5_K
// 10240 x 2560, T = 1): 4 took 9.2 us; 6 took 12.1 us (registers, occupancy); 4 with the first
// batch requested before the activation unpack and the next row set's batch before the reduction
// took 10.3 us. IQ4_XS's units are half the registers of Q5_K's, and at 5 a 2560-wide row (80
// units on 16 lanes) is one batch instead of 4 + 1.
constexpr int kUnitsPerBlock = 8;
// Row sets per warp ring: kRingStages - 1 are in flight while the warp computes one. H200,
// iq3_xxs 48 layers, T = 1, ms a token (bench/results/2026-12-06-h200-mmvq-ring): without the
// ring (the first set pulled toward L2 before the PDL wait) 4.669, 3 stages 4.556 (-2.4%),
// 4 stages 4.670; in a later run 2 stages 4.564 against 3 stages' 4.556. Sets prefetched toward
// L2 instead of copied into shared memory made it slower (1 / 2 / 4 sets ahead: +1.5 / +2.5 /
// +3.1%).
constexpr int kRingStages = 3;
constexpr int kDirectMaxRows = 3;  // window rows up to which this kernel beats mmvq_decode_kernel
                                   // (kernel_for and launch_rows instantiate 1..3)

struct Halves {
  int a[4], b[4];  // the two halves' 16 codes each, 4 per word
  int ca, cb;      // their chunk index within the row
  int ha, hb;      // their half (0: elements 0..15 of the chunk, 1: 16..31)
  float sa, sb;    // scale of each half
  float ma, mb;    // min of each half (0 without one), as Dec<T>::min: y = scale * q + min
};

template <Type T>
struct Unit;

// Q4_K / Q5_K: head (d, dmin, 12 scale bytes) 16 bytes, [Q5_K: qh 32 bytes], qs 128 bytes.
template <Type T>
struct UnitK {
  static constexpr int kBlockBytes = T == Type::Q5_K ? 176 : 144;
  static constexpr int kBatch = 4;
  static constexpr int kQs = T == Type::Q5_K ? 48 : 16;
  struct Raw {
    uint4 head, qs, qh;
  };
  static __device__ __forceinline__ Raw load(const uint8_t* row, int u) {
    const int b = u >> 3, p = (u >> 1) & 3, h = u & 1;
    const uint8_t* blk = row + static_cast<int64_t>(b) * kBlockBytes;
    Raw r;
    r.head = *reinterpret_cast<const uint4*>(blk);
    r.qs = *reinterpret_cast<const uint4*>(blk + kQs + 32 * p + 16 * h);
    if constexpr (T == Type::Q5_K) {
      r.qh = *reinterpret_cast<const uint4*>(blk + 16 + 16 * h);
    } else {
      r.qh = make_uint4(0u, 0u, 0u, 0u);
    }
    return r;
  }
  static __device__ __forceinline__ Halves decode(const Raw& r, int u) {
    const int b = u >> 3, p = (u >> 1) & 3, h = u & 1;
    Halves o;
    const uint32_t qs[4] = {r.qs.x, r.qs.y, r.qs.z, r.qs.w};
    const uint32_t qh[4] = {r.qh.x, r.qh.y, r.qh.z, r.qh.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      uint32_t lo = qs[k] & 0x0F0F0F0Fu, hi = (qs[k] >> 4) & 0x0F0F0F0Fu;
      if constexpr (T == Type::Q5_K) {
        const uint32_t hb = qh[k] >> (2 * p);  // bit 2p: chunk 2p, bit 2p+1: chunk 2p+1
        lo |= (hb & 0x01010101u) << 4;
        hi |= (hb & 0x02020202u) << 3;
      }
      o.a[k] = static_cast<int>(lo);
      o.b[k] = static_cast<int>(hi);
    }
    o.ca = 8 * b + 2 * p;
    o.cb = o.ca + 1;
    o.ha = o.hb = h;
    // The 6-bit (scale, min) pairs of chunks 2p and 2p+1 (scale bytes 0-3, 4-7, 8-11 as words).
    uint32_t sc, mn;
    qd::k_scale_min_words(r.head.y, r.head.z, r.head.w, p >> 1, sc, mn);
    const int sh = 16 * (p & 1);  // chunks (2p, 2p+1) are bytes 2(p&1), 2(p&1)+1 of those words
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.head.x & 0xFFFFu)));
    const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(r.head.x >> 16)));
    o.sa = __fmul_rn(d, static_cast<float>((sc >> sh) & 0xFFu));
    o.sb = __fmul_rn(d, static_cast<float>((sc >> (sh + 8)) & 0xFFu));
    o.ma = -__fmul_rn(dmin, static_cast<float>((mn >> sh) & 0xFFu));
    o.mb = -__fmul_rn(dmin, static_cast<float>((mn >> (sh + 8)) & 0xFFu));
    return o;
  }
};

template <>
struct Unit<Type::Q4_K> : UnitK<Type::Q4_K> {};
template <>
struct Unit<Type::Q5_K> : UnitK<Type::Q5_K> {};

// IQ4_XS: d (f16), scales_h (u16), scales_l[4], qs[128]; 136 bytes, so blocks are 8-byte aligned.
template <>
struct Unit<Type::IQ4_XS> {
  static constexpr int kBlockBytes = 136;
  static constexpr int kBatch = 5;
  struct Raw {
    uint2 head, q0, q1;
  };
  static __device__ __forceinline__ Raw load(const uint8_t* row, int u) {
    const int b = u >> 3, j = u & 7;
    const uint8_t* blk = row + static_cast<int64_t>(b) * kBlockBytes;
    Raw r;
    r.head = *reinterpret_cast<const uint2*>(blk);
    r.q0 = *reinterpret_cast<const uint2*>(blk + 8 + 16 * j);
    r.q1 = *reinterpret_cast<const uint2*>(blk + 16 + 16 * j);
    return r;
  }
  static __device__ __forceinline__ Halves decode(const Raw& r, int u) {
    const int b = u >> 3, j = u & 7;
    const uint32_t q[4] = {r.q0.x, r.q0.y, r.q1.x, r.q1.y};
    Halves o;
    // Two words' nibbles per lookup (lut_iq4nl_x8 shares the selector packing that lut_iq4nl
    // does per word): the T = 1 kernel's SASS 1176 -> 912 instructions; the head's mat-vec is
    // ALU-bound (ncu: ALU pipe 81%, DRAM 25%).
#pragma unroll
    for (int k = 0; k < 4; k += 2) {
      const qd::Group lo = qd::lut_iq4nl_x8(q[k], q[k + 1], 0), hi = qd::lut_iq4nl_x8(q[k], q[k + 1], 4);
      o.a[k] = static_cast<int>(lo.lo);
      o.a[k + 1] = static_cast<int>(lo.hi);
      o.b[k] = static_cast<int>(hi.lo);
      o.b[k + 1] = static_cast<int>(hi.hi);
    }
    o.ca = o.cb = 8 * b + j;
    o.ha = 0;
    o.hb = 1;
    const uint32_t ls = ((r.head.y >> (4 * j)) & 15u) | (((r.head.x >> (16 + 2 * j)) & 3u) << 4);
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.head.x & 0xFFFFu)));
    o.sa = o.sb = __fmul_rn(d, static_cast<float>(static_cast<int>(ls) - 32));
    o.ma = o.mb = 0.0f;
    return o;
  }
};

// The CTA's copy of the window's activations: T rows of K codes, then per (row, chunk, half)
// the pair (d, d * sum of the half's codes).
struct ActView {
  const int8_t* codes;  // [T][K]
  const float2* ds;     // [T][K / 32][2]
  int K;
};

__device__ __forceinline__ void unpack_act(const Shape& p, uint8_t* smem, int T) {
  const int K = p.nchunks * 32;
  int8_t* codes = reinterpret_cast<int8_t*>(smem);
  float2* ds = reinterpret_cast<float2*>(smem + static_cast<size_t>(T) * K);
  for (int i = threadIdx.x; i < T * p.nchunks; i += blockDim.x) {
    const int t = i / p.nchunks, c = i % p.nchunks;
    const uint32_t* src = reinterpret_cast<const uint32_t*>(p.act + t * p.act_stride + static_cast<int64_t>(c) * kActBlockBytes);
    uint32_t w[9];
#pragma unroll
    for (int k = 0; k < 9; ++k) w[k] = src[k];
    uint4* dst = reinterpret_cast<uint4*>(codes + static_cast<size_t>(t) * K + 32 * c);
    dst[0] = make_uint4(w[1], w[2], w[3], w[4]);
    dst[1] = make_uint4(w[5], w[6], w[7], w[8]);
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      s0 = __dp4a(static_cast<int>(w[1 + k]), 0x01010101, s0);
      s1 = __dp4a(static_cast<int>(w[5 + k]), 0x01010101, s1);
    }
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(w[0] & 0xFFFFu)));
    ds[(static_cast<size_t>(t) * p.nchunks + c) * 2 + 0] = make_float2(d, __fmul_rn(d, static_cast<float>(s0)));
    ds[(static_cast<size_t>(t) * p.nchunks + c) * 2 + 1] = make_float2(d, __fmul_rn(d, static_cast<float>(s1)));
  }
}

// One half against activation row t: (d_a * scale) * dot + min * (d_a * sum).
__device__ __forceinline__ float half_dot(const int* codes, int chunk, int half, float scale, float min, const int8_t* arow,
                                          const float2* dsrow) {
  const int4 a = *reinterpret_cast<const int4*>(arow + 32 * chunk + 16 * half);
  int dot = __dp4a(codes[0], a.x, 0);
  dot = __dp4a(codes[1], a.y, dot);
  dot = __dp4a(codes[2], a.z, dot);
  dot = __dp4a(codes[3], a.w, dot);
  const float2 ds = dsrow[2 * chunk + half];
  return fmaf(min, ds.y, __fmul_rn(ds.x, scale) * static_cast<float>(dot));
}

// Row set `set` of the warp (rows_per_warp rows, contiguous in the tensor) into a ring stage, as
// 16-byte asynchronous copies spread over the lanes; past the last set an empty group, so that
// every lane's count of committed groups stays in step with the ring.
__device__ __forceinline__ void fill_stage(const Shape& p, uint8_t* stage, int set, int nsets, int rows_per_warp, int lane) {
  if (set < nsets) {
    const int r0 = set * rows_per_warp, n = min(rows_per_warp, p.rows - r0);
    const uint8_t* src = p.w + static_cast<int64_t>(r0) * p.row_bytes;
    const int bytes = n * static_cast<int>(p.row_bytes);
    for (int off = 16 * lane; off < bytes; off += 32 * 16)
      cp_async16(stage + off, src + off, 16);  // pdl-pre-wait: weights only, never written in a step
  }
  cp_async_commit();
}

template <Type T, int kT>
__global__ void __launch_bounds__(kWarps * 32) mmvq_direct_kernel(const Shape p, const int G) {
  using U = Unit<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  pdl_launch_dependents();
  const int K = p.nchunks * 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gl = lane % G, rows_per_warp = 32 / G;
  const int units = (K / 256) * kUnitsPerBlock;
  const int iters = units / G;  // per lane and row, warp-uniform
  const int nsets = (p.rows + rows_per_warp - 1) / rows_per_warp;
  const int first = blockIdx.x * kWarps + warp, stride = gridDim.x * kWarps;
  const int set_bytes = rows_per_warp * static_cast<int>(p.row_bytes);
  uint8_t* ring = smem + static_cast<size_t>(warp) * kRingStages * set_bytes;
  uint8_t* act = smem + static_cast<size_t>(kWarps) * kRingStages * set_bytes;
  // The ring's first sets are requested while the previous kernel drains.
  for (int k = 0; k < kRingStages - 1; ++k)
    fill_stage(p, ring + k * set_bytes, first + k * stride, nsets, rows_per_warp, lane);  // pdl-pre-wait: weights
  pdl_wait();
  unpack_act(p, act, kT);
  __syncthreads();
  const int8_t* codes = reinterpret_cast<const int8_t*>(act);
  const float2* ds = reinterpret_cast<const float2*>(act + static_cast<size_t>(kT) * K);
  int stage = 0;
  for (int set = first; set < nsets; set += stride) {
    // The stage the previous set used (every lane is past it: __syncwarp below) takes the set
    // kRingStages - 1 ahead; then this set's copies, every lane's, are complete and visible.
    fill_stage(p, ring + (stage == 0 ? kRingStages - 1 : stage - 1) * set_bytes, set + (kRingStages - 1) * stride, nsets,
               rows_per_warp, lane);
    cp_async_wait<kRingStages - 1>();
    __syncwarp();
    const int row = set * rows_per_warp + lane / G;
    const bool live = row < p.rows;  // a dead row reads stale stage bytes and stores nothing
    const uint8_t* wrow = ring + stage * set_bytes + (lane / G) * static_cast<int>(p.row_bytes);
    float acc[kT];
#pragma unroll
    for (int t = 0; t < kT; ++t) acc[t] = 0.0f;
    for (int i0 = 0; i0 < iters; i0 += U::kBatch) {
      typename U::Raw raw[U::kBatch];
#pragma unroll
      for (int k = 0; k < U::kBatch; ++k)
        if (i0 + k < iters) raw[k] = U::load(wrow, gl + G * (i0 + k));
#pragma unroll
      for (int k = 0; k < U::kBatch; ++k) {
        if (i0 + k >= iters) break;
        const Halves h = U::decode(raw[k], gl + G * (i0 + k));
#pragma unroll
        for (int t = 0; t < kT; ++t) {
          const int8_t* arow = codes + static_cast<size_t>(t) * K;
          const float2* dsrow = ds + static_cast<size_t>(t) * p.nchunks * 2;
          acc[t] += half_dot(h.a, h.ca, h.ha, h.sa, h.ma, arow, dsrow) + half_dot(h.b, h.cb, h.hb, h.sb, h.mb, arow, dsrow);
        }
      }
    }
    // The group's sum in a fixed order (xor butterfly within G lanes).
#pragma unroll
    for (int t = 0; t < kT; ++t)
      for (int o = G >> 1; o > 0; o >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
    if (live && gl == 0) {
#pragma unroll
      for (int t = 0; t < kT; ++t) p.y[t * p.y_stride + row] = acc[t];
    }
    __syncwarp();
    stage = stage + 1 == kRingStages ? 0 : stage + 1;
  }
}

// Lanes per row: the largest of 32, 16, 8 that divides the row's units (8 per block always does).
int group_lanes(const Shape& p) {
  const int units = p.nchunks / 8 * kUnitsPerBlock;
  for (int g : {32, 16}) {
    if (units % g == 0) return g;
  }
  return 8;
}

size_t act_smem_bytes(const Shape& p) {
  const size_t K = static_cast<size_t>(p.nchunks) * 32;
  return static_cast<size_t>(p.T) * (K + static_cast<size_t>(p.nchunks) * 2 * sizeof(float2));
}

// The warps' rings, then the activation copy.
size_t smem_bytes(const Shape& p) {
  const size_t set_bytes = static_cast<size_t>(32 / group_lanes(p)) * static_cast<size_t>(p.row_bytes);
  return kWarps * kRingStages * set_bytes + act_smem_bytes(p);
}

template <Type T, int kT>
const void* kernel_ptr() {
  return reinterpret_cast<const void*>(&mmvq_direct_kernel<T, kT>);
}

template <Type T>
const void* kernel_for(int t_rows) {
  switch (t_rows) {
    case 1: return kernel_ptr<T, 1>();
    case 2: return kernel_ptr<T, 2>();
    default: return kernel_ptr<T, 3>();
  }
}

const void* direct_kernel(Type type, int t_rows) {
  switch (type) {
    case Type::Q4_K: return kernel_for<Type::Q4_K>(t_rows);
    case Type::Q5_K: return kernel_for<Type::Q5_K>(t_rows);
    default: return kernel_for<Type::IQ4_XS>(t_rows);
  }
}

template <Type T, int kT>
cudaError_t launch_typed(const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  return launch_kernel(&mmvq_direct_kernel<T, kT>, dim3(static_cast<unsigned>(plan.grid)), dim3(static_cast<unsigned>(plan.threads)),
                       plan.smem_bytes, stream, p, group_lanes(p));
}

template <Type T>
cudaError_t launch_rows(const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  switch (p.T) {
    case 1: return launch_typed<T, 1>(p, plan, stream);
    case 2: return launch_typed<T, 2>(p, plan, stream);
    default: return launch_typed<T, 3>(p, plan, stream);
  }
}

}  // namespace

bool direct_supports(Type type, const Shape& p) {
  if (type != Type::Q4_K && type != Type::Q5_K && type != Type::IQ4_XS) return false;
  // Each activation row costs this kernel its dp4a and shared loads again, while
  // mmvq_decode_kernel's cost hardly depends on T: on the H200 (Q5_K 10240 x 2560) this one took
  // 9.2 / 11.5 / 17.1 / 33.2 us at T = 1 / 2 / 4 / 8, that one ~16 us at any T.
  if (p.T > kDirectMaxRows) return false;
  // Whole 256-element blocks, 16-byte aligned rows (Q4_K / Q5_K blocks are multiples of 16 bytes;
  // IQ4_XS's 136 needs only 8, which every row start then also has), and no more than the
  // rings and activation copy that shared memory holds.
  return p.nchunks % 8 == 0 && p.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0 &&
         smem_bytes(p) <= 96 * 1024;
}

Result<MmvqPlan> plan_direct(Type type, const Shape& p, const DeviceCaps& caps) {
  MmvqPlan plan;
  plan.kernel = "mmvq_direct_kernel";
  plan.threads = kWarps * 32;
  const int G = group_lanes(p);
  plan.rows_per_tile = kWarps * (32 / G);  // rows a CTA has in flight
  plan.smem_bytes = smem_bytes(p);
  auto occ = occupancy(direct_kernel(type, p.T), plan.threads, plan.smem_bytes, caps);
  if (!occ) return occ.status();
  if (*occ <= 0) return Status::error("cuda: mmvq_direct: the row-set rings and activation copy do not fit in shared memory");
  plan.ctas_per_sm = *occ;
  // Row sets of 32 / G rows, one per warp at a time; whole resident waves, balanced.
  const int64_t sets = (p.rows + 32 / G - 1) / (32 / G);
  const int64_t ctas = (sets + kWarps - 1) / kWarps;
  const int64_t slots = static_cast<int64_t>(*occ) * caps.sm_count;
  // Every resident slot takes a CTA (the row sets are walked grid-stride): more warps keep loads
  // in flight than whole balanced passes would (qkvz: 660 CTAs instead of 512).
  plan.grid = static_cast<int>(std::min(ctas, slots));
  plan.ksplit = 1;
  return plan;
}

Status launch_direct(Type type, const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  switch (type) {
    case Type::Q4_K: STRATA_CUDA_TRY(launch_rows<Type::Q4_K>(p, plan, stream)); break;
    case Type::Q5_K: STRATA_CUDA_TRY(launch_rows<Type::Q5_K>(p, plan, stream)); break;
    case Type::IQ4_XS: STRATA_CUDA_TRY(launch_rows<Type::IQ4_XS>(p, plan, stream)); break;
    default: return Status::error("cuda: mmvq_direct: unsupported type");
  }
  return Status::ok_status();
}

}  // namespace strata::cuda::mmvq_detail
