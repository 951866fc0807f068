// mmvq_decode_kernel: quantized W (rows x cols) times T <= 8 q8_1 activation rows, on int8
// tensor cores. Included by the generated one-type instance files (build/.../mmvq_<type>.cu) and
// by mmvq.cu for the shared host helpers; nothing else should include it.
//
// Shape of the work
//   * A warp owns 16 * MT rows ("row group") and one 256-element step of K at a time. For each
//     32-element chunk it decodes, per lane, one group of 8 codes of rows g and g+8 (lane = 4g+q,
//     group q) into an mma A fragment; the chunk's activations of the T rows form the B fragment
//     (column t = row t of the window, zero for t >= T); one m16n8k32 gives the 16 x 8 integer
//     dot products of the chunk, which are scaled (weight scale x activation d) into fp32. A
//     weight is decoded once per launch whatever T is, and T only changes which B columns are
//     zero: the cost per weight byte is the same at T = 1 and T = 8.
//     The k order inside a chunk is permuted (lane q's A/B registers hold elements 8q..8q+7);
//     A and B use the same permutation, so the product is the chunk's dot product.
//   * Types with a scale per 16 elements (kSplit) run two mmas per chunk with the other half's
//     lanes zeroed; types with a min (kMin) add min x d_a x sum(q_a), where sum(q_a) comes from one
//     more mma with A = ones. Everything stays exact integer arithmetic until the per-chunk scale.
//   * A CTA is 8 warps: 8/ksplit row groups x ksplit K-parts. All warps of a CTA step through K
//     together: per step the CTA stages, with 16-byte cp.async copies, each warp's rows x 256
//     elements of W (aligned cover of each row's segment; blocks are only 2-byte aligned) and the
//     T activation rows' blocks for the step, kStages deep. K-parts are summed in a fixed order at
//     the end of a row tile, so results are deterministic run to run.
//   * The grid is persistent: CTA b takes row tiles b, b + grid, ...; its (tile, step) sequence is
//     one pipeline, so the copies of the next tile overlap the current tile's math.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "quant_decode.cuh"
#include "quant_tables.cuh"
#include "strata/cuda/mmvq.h"

namespace strata::cuda::mmvq_detail {

using quant::Type;

inline constexpr int kWarps = 8;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kStages = 3;            // cp.async ring depth (2 steps in flight while one computes)
inline constexpr int kStepElems = 256;       // K per warp step: one super-block, or 8 / 4 small blocks
inline constexpr int kStepChunks = kStepElems / 32;
inline constexpr int kActBlockBytes = 36;    // q8_1

// What the launcher hands to the kernel (validated by cuda::mmvq).
struct Shape {
  const uint8_t* w;
  int64_t row_bytes;
  int rows;
  int nchunks;  // cols / 32
  const uint8_t* act;
  int64_t act_stride;
  int T;
  float* y;
  int64_t y_stride;
};

struct DeviceCaps {
  int device = 0;
  int sm_count = 0;
  int cc = 0;               // 10 * major + minor
  size_t smem_optin = 0;    // max dynamic shared memory per block after opt-in
};

// mmvq.cu: queried once per device.
Result<DeviceCaps> device_caps();
// mmvq.cu: CTAs of `kernel` per SM at `smem` bytes of dynamic shared memory (cached; raises the
// kernel's dynamic shared-memory limit on first use per device).
Result<int> occupancy(const void* kernel, int threads, size_t smem, const DeviceCaps& caps);

// Staged bytes for one row's step segment: its 16-byte aligned cover is at most step + 28 bytes
// (the segment starts 2-byte aligned). An odd multiple of 16 puts the 8 rows a warp reads at once
// on 8 different bank quads.
constexpr int row_slot_bytes(int step_bytes) {
  int s = (step_bytes + 28 + 15) & ~15;
  if ((s / 16) % 2 == 0) s += 16;
  return s;
}

// Staged bytes per activation row for a CTA step of ksplit * 8 chunks (cover of a 4-byte aligned
// run), padded to 32 mod 128 so that rows t = 0..3 read by one instruction hit different banks.
constexpr int act_slot_bytes(int ksplit) {
  int s = ksplit * kStepChunks * kActBlockBytes + 16;
  while (s % 128 != 32) s += 16;
  return s;
}

template <Type T>
struct Geometry {
  using Q = qd::Dec<T>;
  static constexpr int kChunksPerBlock = Q::QK / 32;
  static constexpr int kStepBytes = (kStepElems / Q::QK) * Q::TS;
  static constexpr int kSlot = row_slot_bytes(kStepBytes);
  static constexpr int kPieces = kSlot / 16;
  static constexpr int kTableBytes = (qd::GridTable<Q::kGrid>::kBytes + 15) & ~15;
  static_assert(Q::QK <= kStepElems && kStepElems % Q::QK == 0, "a step must hold whole blocks");
};

template <Type T, int MT>
constexpr size_t smem_bytes(int ksplit, int t_rows) {
  using G = Geometry<T>;
  const size_t stage = static_cast<size_t>(kWarps) * 16 * MT * G::kSlot + static_cast<size_t>(t_rows) * act_slot_bytes(ksplit);
  const size_t reduce = static_cast<size_t>(kWarps) * MT * 4 * 32 * sizeof(float);
  return G::kTableBytes + kStages * stage + reduce;
}

__device__ __forceinline__ const uint8_t* align_down16(const uint8_t* p) {
  return reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) & ~static_cast<uintptr_t>(15));
}
__device__ __forceinline__ int misalign16(const void* p) { return static_cast<int>(reinterpret_cast<uintptr_t>(p) & 15); }

// Copies [seg, seg + len) into dst (16-byte aligned) as whole 16-byte pieces of its aligned cover,
// pieces first .. first + step*k: piece i of the cover lands at dst + 16 i, so the segment starts
// at dst + misalign16(seg). Never reads past seg + len.
__device__ __forceinline__ void stage_piece(uint8_t* dst, const uint8_t* seg, int len, int piece) {
  const uint8_t* src = align_down16(seg) + 16 * piece;
  const int avail = static_cast<int>((seg + len) - src);
  if (avail > 0) cp_async16(dst + 16 * piece, src, avail < 16 ? avail : 16);
}

template <Type T, int MT>
__global__ void __launch_bounds__(kThreads) mmvq_decode_kernel(const Shape p, const int ksplit, const int n_tiles) {
  using Q = qd::Dec<T>;
  using G = Geometry<T>;
  extern __shared__ __align__(16) uint8_t smem[];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int kp = warp % ksplit, mg = warp / ksplit;
  const int groups_per_tile = kWarps / ksplit;
  const int nsteps = (p.nchunks + kStepChunks - 1) / kStepChunks;  // 256-element steps per row
  const int steps_per_tile = (nsteps + ksplit - 1) / ksplit;
  const int my_tiles = static_cast<int>(blockIdx.x) < n_tiles ? (n_tiles - 1 - static_cast<int>(blockIdx.x)) / gridDim.x + 1 : 0;
  const int total = my_tiles * steps_per_tile;
  const int aslot = act_slot_bytes(ksplit);
  const int w_bytes = kWarps * 16 * MT * G::kSlot;
  const int stage_bytes = w_bytes + p.T * aslot;

  // The type's grid table, copied once per CTA (the persistent grid amortizes it).
  if constexpr (G::kTableBytes > 0) {
    const uint4* src = static_cast<const uint4*>(qd::GridTable<Q::kGrid>::ptr());
    for (int i = threadIdx.x; i < G::kTableBytes / 16; i += kThreads) reinterpret_cast<uint4*>(smem)[i] = src[i];
  }
  const qd::Tables tb = qd::tables_at<Q::kGrid>(smem);
  uint8_t* stages = smem + G::kTableBytes;
  float* red = reinterpret_cast<float*>(stages + kStages * stage_bytes);

  // Pipeline index -> (row tile, step within the tile).
  const auto tile_of = [&](int idx) { return static_cast<int>(blockIdx.x) + (idx / steps_per_tile) * static_cast<int>(gridDim.x); };
  const auto step_of = [&](int idx) { return idx % steps_per_tile; };

  const auto issue = [&](int idx) {
    const int tile = tile_of(idx), j = step_of(idx);
    uint8_t* st = stages + (idx % kStages) * stage_bytes;
    const int sb = j * ksplit + kp;
    if (sb < nsteps) {  // this warp's rows x step sb
      const int r0 = (tile * groups_per_tile + mg) * 16 * MT;
      const int64_t off = static_cast<int64_t>(sb) * G::kStepBytes;
      const int len = static_cast<int>(p.row_bytes - off < G::kStepBytes ? p.row_bytes - off : G::kStepBytes);
      uint8_t* wdst = st + warp * 16 * MT * G::kSlot;
      for (int i = lane; i < 16 * MT * G::kPieces; i += 32) {
        const int rr = i / G::kPieces, piece = i % G::kPieces;
        if (r0 + rr < p.rows) stage_piece(wdst + rr * G::kSlot, p.w + (r0 + rr) * p.row_bytes + off, len, piece);
      }
    }
    // The window's activation blocks for chunks [c0, c1), shared by the CTA's row groups.
    const int c0 = j * ksplit * kStepChunks;
    const int c1 = c0 + ksplit * kStepChunks < p.nchunks ? c0 + ksplit * kStepChunks : p.nchunks;
    const int apieces = aslot / 16;
    for (int i = threadIdx.x; i < p.T * apieces; i += kThreads) {
      const int t = i / apieces, piece = i % apieces;
      stage_piece(st + w_bytes + t * aslot, p.act + t * p.act_stride + c0 * kActBlockBytes, (c1 - c0) * kActBlockBytes, piece);
    }
  };

  float acc[MT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
    for (int i = 0; i < 4; ++i) acc[m][i] = 0.0f;

  const auto compute = [&](int idx) {
    const int tile = tile_of(idx), j = step_of(idx);
    const int sb = j * ksplit + kp;
    if (sb >= nsteps) return;  // warp-uniform
    const uint8_t* st = stages + (idx % kStages) * stage_bytes;
    const int c0 = j * ksplit * kStepChunks;
    const int r0 = (tile * groups_per_tile + mg) * 16 * MT;
    const int64_t off = static_cast<int64_t>(sb) * G::kStepBytes;

    // Activation rows this lane reads: t = g for the B fragment, t = 2q, 2q+1 for the scales.
    const uint8_t* ast = st + w_bytes;
    const auto act_row = [&](int t) { return ast + t * aslot + misalign16(p.act + t * p.act_stride + c0 * kActBlockBytes); };
    const uint8_t* a_b = act_row(g < p.T ? g : 0);
    const uint8_t* a_d0 = act_row(2 * q < p.T ? 2 * q : 0);
    const uint8_t* a_d1 = act_row(2 * q + 1 < p.T ? 2 * q + 1 : 0);
    const bool b_live = g < p.T, d0_live = 2 * q < p.T, d1_live = 2 * q + 1 < p.T;

    // This lane's rows g and g+8 of each m-tile, as block pointers into the staged step.
    const uint8_t* rowp[MT][2];
    bool row_live[MT][2];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rr = 16 * m + g + 8 * h;
        row_live[m][h] = r0 + rr < p.rows;
        rowp[m][h] = st + warp * 16 * MT * G::kSlot + rr * G::kSlot + misalign16(p.w + (r0 + rr) * p.row_bytes + off);
      }

    const int nc = p.nchunks - sb * kStepChunks < kStepChunks ? p.nchunks - sb * kStepChunks : kStepChunks;
#pragma unroll
    for (int cc = 0; cc < kStepChunks; ++cc) {
      if (cc >= nc) break;  // warp-uniform: only a short last step of a 32/64-element type
      const int ab = (sb * kStepChunks + cc - c0) * kActBlockBytes;
      int b[2] = {0, 0};
      if (b_live) {
        b[0] = *reinterpret_cast<const int*>(a_b + ab + 4 + 8 * q);
        b[1] = *reinterpret_cast<const int*>(a_b + ab + 8 + 8 * q);
      }
      const float da0 = d0_live ? qd::f16_at(a_d0 + ab, 0) : 0.0f;
      const float da1 = d1_live ? qd::f16_at(a_d1 + ab, 0) : 0.0f;
      float s0 = 0.0f, s1 = 0.0f;  // d_a * sum(q_a) of rows 2q, 2q+1 (exact: 11 x 13 bits)
      if constexpr (Q::kMin) {
        int cs[4] = {0, 0, 0, 0};
        const int ones[4] = {0x01010101, 0x01010101, 0x01010101, 0x01010101};
        mma_s8_16x8x32(cs, ones, b);
        s0 = da0 * static_cast<float>(cs[0]);
        s1 = da1 * static_cast<float>(cs[1]);
      }
      const int blk = cc / G::kChunksPerBlock, ch = cc % G::kChunksPerBlock;
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const uint8_t* ba = rowp[m][0] + blk * Q::TS;
        const uint8_t* bb = rowp[m][1] + blk * Q::TS;
        qd::Group ga{0, 0}, gb{0, 0};
        if (row_live[m][0]) ga = Q::group(ba, ch, q, tb);
        if (row_live[m][1]) gb = Q::group(bb, ch, q, tb);
        if constexpr (!Q::kSplit) {
          int c[4] = {0, 0, 0, 0};
          const int a[4] = {static_cast<int>(ga.lo), static_cast<int>(gb.lo), static_cast<int>(ga.hi), static_cast<int>(gb.hi)};
          mma_s8_16x8x32(c, a, b);
          const float sa = row_live[m][0] ? Q::scale(ba, ch, 0) : 0.0f;
          const float sbb = row_live[m][1] ? Q::scale(bb, ch, 0) : 0.0f;
          acc[m][0] = fmaf(sa * da0, static_cast<float>(c[0]), acc[m][0]);
          acc[m][1] = fmaf(sa * da1, static_cast<float>(c[1]), acc[m][1]);
          acc[m][2] = fmaf(sbb * da0, static_cast<float>(c[2]), acc[m][2]);
          acc[m][3] = fmaf(sbb * da1, static_cast<float>(c[3]), acc[m][3]);
          if constexpr (Q::kMin) {
            const float ma = row_live[m][0] ? Q::min(ba, ch) : 0.0f;
            const float mb = row_live[m][1] ? Q::min(bb, ch) : 0.0f;
            acc[m][0] = fmaf(ma, s0, acc[m][0]);
            acc[m][1] = fmaf(ma, s1, acc[m][1]);
            acc[m][2] = fmaf(mb, s0, acc[m][2]);
            acc[m][3] = fmaf(mb, s1, acc[m][3]);
          }
        } else {
          static_assert(!Q::kMin, "no split-scale type has a min");
          // Half 0 = groups 0-1 (lanes q < 2), half 1 = groups 2-3.
          const bool first = q < 2;
          const int a_lo[4] = {first ? static_cast<int>(ga.lo) : 0, first ? static_cast<int>(gb.lo) : 0,
                               first ? static_cast<int>(ga.hi) : 0, first ? static_cast<int>(gb.hi) : 0};
          const int a_hi[4] = {first ? 0 : static_cast<int>(ga.lo), first ? 0 : static_cast<int>(gb.lo),
                               first ? 0 : static_cast<int>(ga.hi), first ? 0 : static_cast<int>(gb.hi)};
          int c0h[4] = {0, 0, 0, 0}, c1h[4] = {0, 0, 0, 0};
          mma_s8_16x8x32(c0h, a_lo, b);
          mma_s8_16x8x32(c1h, a_hi, b);
          const float sa0 = row_live[m][0] ? Q::scale(ba, ch, 0) : 0.0f;
          const float sa1 = row_live[m][0] ? Q::scale(ba, ch, 1) : 0.0f;
          const float sb0 = row_live[m][1] ? Q::scale(bb, ch, 0) : 0.0f;
          const float sb1 = row_live[m][1] ? Q::scale(bb, ch, 1) : 0.0f;
          acc[m][0] = fmaf(sa1 * da0, static_cast<float>(c1h[0]), fmaf(sa0 * da0, static_cast<float>(c0h[0]), acc[m][0]));
          acc[m][1] = fmaf(sa1 * da1, static_cast<float>(c1h[1]), fmaf(sa0 * da1, static_cast<float>(c0h[1]), acc[m][1]));
          acc[m][2] = fmaf(sb1 * da0, static_cast<float>(c1h[2]), fmaf(sb0 * da0, static_cast<float>(c0h[2]), acc[m][2]));
          acc[m][3] = fmaf(sb1 * da1, static_cast<float>(c1h[3]), fmaf(sb0 * da1, static_cast<float>(c0h[3]), acc[m][3]));
        }
      }
    }
  };

  // End of a row tile: sum the K-parts in order kp = 0, 1, ... and write y.
  const auto finish = [&](int idx) {
    const int r0 = (tile_of(idx) * groups_per_tile + mg) * 16 * MT;
    if (ksplit > 1) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
        for (int i = 0; i < 4; ++i) red[((warp * MT + m) * 4 + i) * 32 + lane] = acc[m][i];
      __syncthreads();
      if (kp == 0) {
#pragma unroll
        for (int m = 0; m < MT; ++m)
          for (int i = 0; i < 4; ++i) {
            float s = 0.0f;
            for (int k = 0; k < ksplit; ++k) s += red[(((mg * ksplit + k) * MT + m) * 4 + i) * 32 + lane];
            acc[m][i] = s;
          }
      }
    }
    if (kp == 0) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
        for (int i = 0; i < 4; ++i) {
          const int row = r0 + 16 * m + g + 8 * (i >> 1);
          const int t = 2 * q + (i & 1);
          if (row < p.rows && t < p.T) p.y[t * p.y_stride + row] = acc[m][i];
        }
    }
#pragma unroll
    for (int m = 0; m < MT; ++m)
      for (int i = 0; i < 4; ++i) acc[m][i] = 0.0f;
  };

  for (int s = 0; s < kStages - 1; ++s) {
    if (s < total) issue(s);
    cp_async_commit();
  }
  for (int idx = 0; idx < total; ++idx) {
    if (idx + kStages - 1 < total) issue(idx + kStages - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncthreads();  // stage idx visible to every warp
    compute(idx);
    if (step_of(idx) == steps_per_tile - 1) finish(idx);  // CTA-uniform
    __syncthreads();  // stage idx may be refilled by the next iteration's issue
  }
}

// The rows one warp owns. [TAG_MMVQ_MT] MT = 1 only for now: MT = 2 halves the activation reads per
// weight byte but also the number of row groups, which the model's shapes cannot spare.
inline constexpr int kMT = 1;

// Launch choice: ksplit in {1, 2, 4, 8} minimising (waves x steps per tile) on this device.
template <Type T>
Result<MmvqPlan> plan_quant(const Shape& p, const DeviceCaps& caps) {
  const auto kernel = reinterpret_cast<const void*>(&mmvq_decode_kernel<T, kMT>);
  const int nsteps = (p.nchunks + kStepChunks - 1) / kStepChunks;
  const int64_t row_groups = (static_cast<int64_t>(p.rows) + 16 * kMT - 1) / (16 * kMT);
  MmvqPlan best;
  double best_cost = 0.0;
  for (int ks = 1; ks <= kWarps; ks *= 2) {
    if (ks > 1 && ks / 2 >= nsteps) break;  // keep at least half of the K-parts busy
    const size_t smem = smem_bytes<T, kMT>(ks, p.T);
    if (smem > caps.smem_optin) continue;
    auto occ = occupancy(kernel, kThreads, smem, caps);
    if (!occ) return occ.status();
    if (*occ <= 0) continue;
    const int64_t tiles = (row_groups + kWarps / ks - 1) / (kWarps / ks);
    const int64_t slots = static_cast<int64_t>(*occ) * caps.sm_count;
    const int64_t grid = tiles < slots ? tiles : slots;
    const int64_t waves = (tiles + grid - 1) / grid;
    const int steps_per_tile = (nsteps + ks - 1) / ks;
    // A K-split costs one reduction per tile; count it as a small fraction of a step.
    const double cost = static_cast<double>(waves * steps_per_tile) * (ks > 1 ? 1.02 : 1.0);
    if (best.grid == 0 || cost < best_cost) {
      best_cost = cost;
      best.kernel = "mmvq_decode_kernel";
      best.threads = kThreads;
      best.grid = static_cast<int>(grid);
      best.ksplit = ks;
      best.rows_per_tile = kWarps / ks * 16 * kMT;
      best.ctas_per_sm = *occ;
      best.smem_bytes = smem;
    }
  }
  if (best.grid == 0) return Status::error("cuda: mmvq: no launch configuration fits this device's shared memory");
  return best;
}

template <Type T>
Status launch_quant(const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  const int64_t row_groups = (static_cast<int64_t>(p.rows) + 16 * kMT - 1) / (16 * kMT);
  const int tiles = static_cast<int>((row_groups + kWarps / plan.ksplit - 1) / (kWarps / plan.ksplit));
  mmvq_decode_kernel<T, kMT><<<plan.grid, kThreads, plan.smem_bytes, stream>>>(p, plan.ksplit, tiles);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

// One generated file per type instantiates these two (see src/cuda/CMakeLists.txt).
#define STRATA_MMVQ_DECLARE(name)                                                                  \
  extern template Result<MmvqPlan> plan_quant<Type::name>(const Shape&, const DeviceCaps&);       \
  extern template Status launch_quant<Type::name>(const Shape&, const MmvqPlan&, cudaStream_t);
STRATA_MMVQ_QUANT_TYPES(STRATA_MMVQ_DECLARE)
#undef STRATA_MMVQ_DECLARE

// mmvf.cu: F32 / F16 / BF16 weights with f32 activations.
Result<MmvqPlan> plan_float(Type type, const Shape& p, const DeviceCaps& caps);
Status launch_float(Type type, const Shape& p, const MmvqPlan& plan, cudaStream_t stream);

}  // namespace strata::cuda::mmvq_detail
