// mmvq_mma_kernel: the register-direct mat-vec on int8 tensor cores, for the 256-element
// super-block types whose blocks are aligned in every row (Q4_K, Q5_K, IQ4_XS), T = 1..8.
//
// Why a third kernel: mmvq_direct_kernel pays its dp4a and shared loads again for every window
// row (Q5_K 10240 x 2560 on the H200: 9.2 / 17.1 / 33.2 us at T = 1 / 4 / 8), and
// mmvq_decode_kernel, whose tensor-core cost does not depend on T, stages every weight through
// shared memory and issues ~133 instructions per 512 weights (~16 us at any T). Here a warp reads
// its rows' blocks straight from global memory into registers already in the mma's A-fragment
// layout, and one m16n8k32 per 32-element chunk multiplies 16 rows by all T <= 8 window rows at
// once: about 65 SASS instructions per 512 weights (Q5_K: the two rows' decode, two mmas, the
// scales and the fp32 sums), whatever T is.
//
// Shape of the work
//   * A warp owns 16 rows (a row group) and a contiguous range of their blocks (a K-part). Lane
//     4g + q holds rows g and g + 8, elements 8q .. 8q + 7 of every chunk: a0 / a1 are elements
//     8q .. 8q+3 of rows g / g+8, a2 / a3 elements 8q+4 .. 8q+7. That is a permutation of k
//     within the chunk which B shares, so each mma still gives the chunk's dot products.
//     Q5_K, per block and row: the 16-byte head, qh bytes 8q .. 8q+7 (bit c: chunk c's fifth
//     bit) and qs bytes 32p + 8q .. (chunk 2p: low nibbles, 2p + 1: high), 6 loads.
//   * B is window row t = g's codes 8q .. 8q+7 of the chunk, read from the warp's copy of the
//     block's q8_1 activations in shared memory (cp.async, a block ahead); lanes g >= T read row
//     T - 1, whose product columns are never stored.
//   * Per chunk and output (row r, window row t): y += (d sc)_r (d_t dot) + (-dmin m)_r (d_t
//     sum_t): the reference's weight scale and min products (same roundings), the activation
//     side exact; sum_t, the chunk's code sum that the K types' min needs, comes from one more
//     mma with A = ones. Summed in another order than the reference (docs/PARITY.md bounds
//     mmvq by relative error).
//   * Integer-to-float conversions use the exponent trick: the bits 0x4B400000 + x are the float
//     1.5 * 2^23 + x for |x| < 2^22, so a * x = fma(a, that, -a * 1.5 * 2^23), rounded once, as
//     __fmul_rn(a, float(x)) (a * 1.5 * 2^23 is exact for the f16-derived a here). An integer add
//     (or one byte_perm for a scale byte) replaces an I2F, which issues at 16 per SM per clock.
//     |dot| <= 32 * 127 * 127 < 2^22.
//   * A CTA is `groups` row groups x `ksplit` K-parts, one warp each; K-parts are summed in the
//     fixed order kp = 0, 1, ... through shared memory, so results are deterministic. Each warp
//     keeps the next block's loads in flight while it multiplies the current one, and requests its
//     first block, and the CTA's weight slice toward L2, before pdl_wait().
#include <cuda_fp16.h>

#include <cstdint>

#include "launch.cuh"
#include "mmvq.cuh"
#include "mmvq_mma.h"

namespace strata::cuda::mmvq_detail {
namespace {

constexpr int kBlockChunks = 8;  // a 256-element super-block
constexpr uint32_t kMagicBits = 0x4B400000u;
constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
constexpr int kActSegBytes = kBlockChunks * kActBlockBytes;  // one block's q8_1 activations of one row
constexpr int kActSegPieces = kActSegBytes / 16;
static_assert(kActSegBytes % 16 == 0, "a block's activation segment is whole 16-byte pieces");       // T = 1 matrices of at most this many rows (mma_preferred)

__device__ __forceinline__ float magic_of(int x) { return __int_as_float(static_cast<int>(kMagicBits) + x); }
// a * x for the integer x given as magic_of(x), with a_magic = a * kMagic.
__device__ __forceinline__ float times(float a, float a_magic, float xm) { return fmaf(a, xm, -a_magic); }

template <Type T>
struct MmaBlock;

// Q4_K / Q5_K: d | dmin << 16 and 12 scale bytes (16), [Q5_K: qh 32], qs 128.
template <Type T>
struct MmaBlockK {
  static constexpr int kBytes = T == Type::Q5_K ? 176 : 144;
  static constexpr int kQs = T == Type::Q5_K ? 48 : 16;
  static constexpr bool kMin = true;
  struct Raw {
    uint4 head;
    uint2 qh;
    uint2 qs[4];
  };
  // The block's scales, ready per chunk: d and -dmin with their magic products, and the 6-bit
  // scales and mins of chunks 0-3 / 4-7 one byte each (scale_min_k4, word-wise).
  struct Scales {
    float d, d_magic, nmin, nmin_magic;
    uint32_t sc[2], mn[2];
  };
  static __device__ __forceinline__ Raw load(const uint8_t* blk, int q) {
    Raw r;
    r.head = __ldg(reinterpret_cast<const uint4*>(blk));  // pdl-pre-wait: weights
    if constexpr (T == Type::Q5_K) r.qh = __ldg(reinterpret_cast<const uint2*>(blk + 16 + 8 * q));  // pdl-pre-wait: weights
#pragma unroll
    for (int p = 0; p < 4; ++p) r.qs[p] = __ldg(reinterpret_cast<const uint2*>(blk + kQs + 32 * p + 8 * q));  // pdl-pre-wait: weights
    return r;
  }
  static __device__ __forceinline__ Scales scales(const Raw& r) {
    Scales s;
    s.d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.head.x & 0xFFFFu)));
    s.nmin = -__half2float(__ushort_as_half(static_cast<unsigned short>(r.head.x >> 16)));
    s.d_magic = s.d * kMagic;
    s.nmin_magic = s.nmin * kMagic;
    qd::k_scale_min_words(r.head.y, r.head.z, r.head.w, 0, s.sc[0], s.mn[0]);  // scale bytes 0-3, 4-7, 8-11
    qd::k_scale_min_words(r.head.y, r.head.z, r.head.w, 1, s.sc[1], s.mn[1]);
    return s;
  }
  // Byte (ch & 3) of w under the magic exponent: magic_of(that byte) in one byte_perm.
  static __device__ __forceinline__ float magic_byte(uint32_t w, int ch) { return __int_as_float(__byte_perm(w, kMagicBits, 0x7650u | (ch & 3))); }
  static __device__ __forceinline__ float scale(const Scales& s, int ch) { return times(s.d, s.d_magic, magic_byte(s.sc[ch >> 2], ch)); }
  static __device__ __forceinline__ float min(const Scales& s, int ch) { return times(s.nmin, s.nmin_magic, magic_byte(s.mn[ch >> 2], ch)); }
  static __device__ __forceinline__ qd::Group codes(const Raw& r, int ch, int) {
    const int sh = 4 * (ch & 1);
    const uint2 n = r.qs[ch >> 1];
    qd::Group g{(n.x >> sh) & 0x0F0F0F0Fu, (n.y >> sh) & 0x0F0F0F0Fu};
    if constexpr (T == Type::Q5_K) {
      g.lo |= ((r.qh.x >> ch) & 0x01010101u) << 4;
      g.hi |= ((r.qh.y >> ch) & 0x01010101u) << 4;
    }
    return g;
  }
};

template <>
struct MmaBlock<Type::Q4_K> : MmaBlockK<Type::Q4_K> {};
template <>
struct MmaBlock<Type::Q5_K> : MmaBlockK<Type::Q5_K> {};

// IQ4_XS: d (f16), scales_h (u16), scales_l[4], qs[128]; 136 bytes, so blocks are 8-byte aligned.
// Chunk ch is qs bytes 16 ch ..: elements 0-15 their low nibbles, 16-31 the high ones, so lane q's
// elements 8q .. 8q+7 are the nibbles (q >> 1) of bytes 8 (q & 1) ...
template <>
struct MmaBlock<Type::IQ4_XS> {
  static constexpr int kBytes = 136;
  static constexpr bool kMin = false;
  struct Raw {
    uint2 head;
    uint2 qs[8];
  };
  struct Scales {
    float d, d_magic;
    uint32_t lo, hi;  // scales_l (4 bits per chunk), scales_h (2 bits per chunk)
  };
  static __device__ __forceinline__ Raw load(const uint8_t* blk, int q) {
    Raw r;
    r.head = __ldg(reinterpret_cast<const uint2*>(blk));  // pdl-pre-wait: weights
#pragma unroll
    for (int ch = 0; ch < 8; ++ch) r.qs[ch] = __ldg(reinterpret_cast<const uint2*>(blk + 8 + 16 * ch + 8 * (q & 1)));  // pdl-pre-wait: weights
    return r;
  }
  static __device__ __forceinline__ Scales scales(const Raw& r) {
    Scales s;
    s.d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.head.x & 0xFFFFu)));
    s.d_magic = s.d * kMagic;
    s.lo = r.head.y;
    s.hi = r.head.x >> 16;
    return s;
  }
  static __device__ __forceinline__ float scale(const Scales& s, int ch) {
    const int ls = static_cast<int>(((s.lo >> (4 * ch)) & 15u) | (((s.hi >> (2 * ch)) & 3u) << 4));
    return times(s.d, s.d_magic, magic_of(ls - 32));
  }
  static __device__ __forceinline__ float min(const Scales&, int) { return 0.0f; }
  static __device__ __forceinline__ qd::Group codes(const Raw& r, int ch, int q) {
    return qd::lut_iq4nl_x8(r.qs[ch].x, r.qs[ch].y, 4 * (q >> 1));
  }
};

// Launched with blockDim.x = 32 * groups * ksplit; CTA b owns row groups b * groups .. + groups - 1.
template <Type T>
__global__ void __launch_bounds__(kMaxThreads) mmvq_mma_kernel(const Shape p, const int ksplit) {
  using B = MmaBlock<T>;
  // Dynamic shared memory: each warp's activation ring (2 x T x 288 bytes), then the K-part sums
  // ([warps][4][32] floats) when ksplit > 1.
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int nwarps = static_cast<int>(blockDim.x) >> 5;
  const int kp = warp % ksplit, mg = warp / ksplit, groups = nwarps / ksplit;
  const int r0 = (static_cast<int>(blockIdx.x) * groups + mg) * 16;
  const int nb = p.nchunks / kBlockChunks;
  const bool live = r0 < p.rows;
  const int b_begin = live ? kp * nb / ksplit : 0, b_end = live ? (kp + 1) * nb / ksplit : 0;
  // Rows past the end read the last row; their sums are never stored.
  const uint8_t* wa = p.w + static_cast<int64_t>(min(r0 + g, p.rows - 1)) * p.row_bytes;
  const uint8_t* wb = p.w + static_cast<int64_t>(min(r0 + g + 8, p.rows - 1)) * p.row_bytes;
  const auto load = [&](typename B::Raw (&buf)[2], int b) {
    buf[0] = B::load(wa + static_cast<int64_t>(b) * B::kBytes, q);
    buf[1] = B::load(wb + static_cast<int64_t>(b) * B::kBytes, q);
  };

  typename B::Raw buf0[2], buf1[2];
  pdl_launch_dependents();
  {
    const int cta_row0 = static_cast<int>(blockIdx.x) * groups * 16;
    const int cta_rows = min(p.rows - cta_row0, groups * 16);
    if (cta_rows > 0) prefetch_l2(p.w + static_cast<int64_t>(cta_row0) * p.row_bytes, static_cast<int64_t>(cta_rows) * p.row_bytes);
  }
  if (b_begin < b_end) load(buf0, b_begin);  // pdl-pre-wait: weights
  pdl_wait();

  // Window row t of block b's activations: 288 bytes (8 q8_1 blocks) at act + t stride + 288 b,
  // 16-byte aligned. Each warp copies the next block's T segments into its own two-stage ring in
  // shared memory while it multiplies the current one: read from global memory just before use,
  // the loads that missed L1 stalled the warp on L2's latency (ncu, qkv 10240 x 2560 at T = 4: 44%
  // of samples on long scoreboards, most at those loads), and prefetch.global.L1 one block ahead
  // was slower still (10240 x 2560 T = 4: 11.2 -> 12.7 us).
  const int stage_bytes = p.T * kActSegBytes;
  uint8_t* ring = smem + warp * 2 * stage_bytes;
  const auto stage_act = [&](int b) {
    uint8_t* st = ring + (b & 1) * stage_bytes;
    const uint8_t* src = p.act + static_cast<int64_t>(b) * kActSegBytes;
    for (int i = lane; i < p.T * kActSegPieces; i += 32) {
      const int t = i / kActSegPieces, piece = i % kActSegPieces;
      cp_async16(st + t * kActSegBytes + 16 * piece, src + t * p.act_stride + 16 * piece, 16);
    }
    cp_async_commit();
  };
  // The rows of a stage this lane reads: t = g for B, t = 2q and 2q + 1 for the scales.
  const int off_b = min(g, p.T - 1) * kActSegBytes + 4 + 8 * q;
  const int off_d0 = min(2 * q, p.T - 1) * kActSegBytes, off_d1 = min(2 * q + 1, p.T - 1) * kActSegBytes;
  if (b_begin < b_end) stage_act(b_begin);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

  const auto block = [&](const typename B::Raw (&buf)[2], int b) {
    const typename B::Scales sa = B::scales(buf[0]), sb = B::scales(buf[1]);
    const uint8_t* st = ring + (b & 1) * stage_bytes;
#pragma unroll
    for (int ch = 0; ch < kBlockChunks; ++ch) {
      const int ab = ch * kActBlockBytes;
      const int bf[2] = {*reinterpret_cast<const int*>(st + off_b + ab), *reinterpret_cast<const int*>(st + off_b + ab + 4)};
      const float d0 = __half2float(*reinterpret_cast<const __half*>(st + off_d0 + ab));
      const float d1 = __half2float(*reinterpret_cast<const __half*>(st + off_d1 + ab));
      const float d0m = d0 * kMagic, d1m = d1 * kMagic;
      const qd::Group ga = B::codes(buf[0], ch, q), gb = B::codes(buf[1], ch, q);
      const int af[4] = {static_cast<int>(ga.lo), static_cast<int>(gb.lo), static_cast<int>(ga.hi), static_cast<int>(gb.hi)};
      int c[4] = {0, 0, 0, 0};
      mma_s8_16x8x32(c, af, bf);
      const float s_a = B::scale(sa, ch), s_b = B::scale(sb, ch);
      acc[0] = fmaf(s_a, times(d0, d0m, magic_of(c[0])), acc[0]);
      acc[1] = fmaf(s_a, times(d1, d1m, magic_of(c[1])), acc[1]);
      acc[2] = fmaf(s_b, times(d0, d0m, magic_of(c[2])), acc[2]);
      acc[3] = fmaf(s_b, times(d1, d1m, magic_of(c[3])), acc[3]);
      if constexpr (B::kMin) {
        constexpr int kOnes = 0x01010101;
        const int ones[4] = {kOnes, kOnes, kOnes, kOnes};
        int cs[4] = {0, 0, 0, 0};
        mma_s8_16x8x32(cs, ones, bf);
        const float sum0 = times(d0, d0m, magic_of(cs[0])), sum1 = times(d1, d1m, magic_of(cs[1]));
        const float m_a = B::min(sa, ch), m_b = B::min(sb, ch);
        acc[0] = fmaf(m_a, sum0, acc[0]);
        acc[1] = fmaf(m_a, sum1, acc[1]);
        acc[2] = fmaf(m_b, sum0, acc[2]);
        acc[3] = fmaf(m_b, sum1, acc[3]);
      }
    }
  };

  // Two register buffers in turn: block b + 1's weights and activations are in flight while
  // block b is multiplied. The __syncwarp()s publish the stage's copies to the warp, then keep
  // the stage from being refilled while a lane may still read it.
  const auto next = [&](typename B::Raw (&buf)[2], int b) {
    if (b < b_end) {
      load(buf, b);
      stage_act(b);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();
  };
  for (int b = b_begin; b < b_end; b += 2) {
    next(buf1, b + 1);
    block(buf0, b);
    __syncwarp();
    if (b + 1 >= b_end) break;
    next(buf0, b + 2);
    block(buf1, b + 1);
    __syncwarp();
  }

  if (ksplit > 1) {  // CTA-uniform: sum the K-parts in order kp = 0, 1, ...
    float* red = reinterpret_cast<float*>(smem + nwarps * 2 * stage_bytes);
#pragma unroll
    for (int i = 0; i < 4; ++i) red[(warp * 4 + i) * 32 + lane] = acc[i];
    __syncthreads();
    if (kp == 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float s = 0.0f;
        for (int k = 0; k < ksplit; ++k) s += red[((mg * ksplit + k) * 4 + i) * 32 + lane];
        acc[i] = s;
      }
    }
  }
  if (kp == 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = r0 + g + 8 * (i >> 1), t = 2 * q + (i & 1);
      if (row < p.rows && t < p.T) p.y[t * p.y_stride + row] = acc[i];
    }
  }
}

const void* mma_kernel(Type type) {
  switch (type) {
    case Type::Q4_K: return reinterpret_cast<const void*>(&mmvq_mma_kernel<Type::Q4_K>);
    case Type::Q5_K: return reinterpret_cast<const void*>(&mmvq_mma_kernel<Type::Q5_K>);
    default: return reinterpret_cast<const void*>(&mmvq_mma_kernel<Type::IQ4_XS>);
  }
}

template <Type T>
cudaError_t launch_typed(const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  return launch_kernel(&mmvq_mma_kernel<T>, dim3(static_cast<unsigned>(plan.grid)), dim3(static_cast<unsigned>(plan.threads)),
                       plan.smem_bytes, stream, p, plan.ksplit);
}

}  // namespace

bool mma_supports(Type type, const Shape& p) {
  if (type != Type::Q4_K && type != Type::Q5_K && type != Type::IQ4_XS) return false;
  // Whole 256-element blocks and rows aligned for the blocks' widest load (the K types' 16-byte
  // head; IQ4_XS reads 8 bytes at a time and its 136-byte blocks keep that alignment).
  return p.nchunks % kBlockChunks == 0 && p.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
}

// Measured on the H200 (bench/results/2026-12-02-h200-mmvq-mma): from T = 2 this kernel beats
// mmvq_direct_kernel, which pays its dp4a again per window row, and at T = 4 / 8 it beats
// mmvq_decode_kernel (Q5_K 10240 x 2560: 10.4 / 11.1 us against ~13.3 / 14.5). At T = 1 the
// direct kernel stays: faster on large matrices (10240 x 2560: 8.9 against 10.6 us), and although
// this one is faster alone on small ones (640 x 2560: 2.9 against 4.1 us), routing those here
// made the whole T = 1 step 1.3% slower.
bool mma_preferred(const Shape& p) { return p.T >= 2; }

Result<MmvqPlan> plan_mma(Type type, const Shape& p, const DeviceCaps& caps) {
  const LaunchShape s{(static_cast<int64_t>(p.rows) + 15) / 16, p.nchunks / kBlockChunks, caps.sm_count};
  // Per warp: its activation ring, and the K-part sums (one float per accumulator and lane).
  const int t_rows = p.T;
  const auto smem = [t_rows](int warps, int ksplit) -> size_t {
    return static_cast<size_t>(warps) * (2 * t_rows * kActSegBytes + (ksplit > 1 ? 4 * 32 * sizeof(float) : 0));
  };
  return plan_split("mmvq_mma_kernel", mma_kernel(type), s, smem, caps);
}

Status launch_mma(Type type, const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  switch (type) {
    case Type::Q4_K: STRATA_CUDA_TRY(launch_typed<Type::Q4_K>(p, plan, stream)); break;
    case Type::Q5_K: STRATA_CUDA_TRY(launch_typed<Type::Q5_K>(p, plan, stream)); break;
    case Type::IQ4_XS: STRATA_CUDA_TRY(launch_typed<Type::IQ4_XS>(p, plan, stream)); break;
    default: return Status::error("cuda: mmvq_mma: unsupported type");
  }
  return Status::ok_status();
}

}  // namespace strata::cuda::mmvq_detail
