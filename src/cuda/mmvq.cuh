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
//   * A CTA is `groups` row groups x `ksplit` K-parts, one warp each (1..16 warps). K-part kp of a
//     row group takes the steps kp, kp + ksplit, ... of its rows. Every warp streams through its
//     own cp.async ring, kStages deep: per step it stages its rows' 256-element segments (16-byte
//     copies of each segment's aligned cover; blocks are only 2-byte aligned) and the T
//     activation rows' 8 q8_1 blocks of the step. Warps synchronise only with themselves
//     (__syncwarp) while streaming, so each keeps kStages - 1 steps of loads in flight whatever its
//     neighbours do; that, and many small CTAs per SM, is what covers the HBM latency.
//   * At the end the K-parts of a row group are summed in the fixed order kp = 0, 1, ... through
//     shared memory (one CTA barrier), so results are deterministic run to run; for a given
//     ksplit the summation is the same as a single warp walking its steps in order.
//   * The grid is one CTA per `groups` row groups (no persistent loop): rows are few enough per
//     launch that the block scheduler's refill costs less than a serialised pipeline would.
//     plan_quant picks groups and ksplit (any 1..16) per shape; the reasoning is at kSmStepsPerUnit.
//   * PDL: the CTA's weight slice is prefetched toward L2 and the ring's first weight stages are
//     requested before pdl_wait(); activations are staged and y written after it.
//   * Q4_K / Q5_K / IQ4_XS decode from the staged block with wide shared loads (kWideDecode):
//     their blocks are 16- / 8-byte aligned in the ring, which Dec cannot assume in general.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "common.cuh"
#include "launch.cuh"
#include "quant_decode.cuh"
#include "quant_tables.cuh"
#include "strata/cuda/mmvq.h"

namespace strata::cuda::mmvq_detail {

using quant::Type;

inline constexpr int kMaxWarps = 16;         // per CTA; 512 threads leave 128 registers a thread
inline constexpr int kMaxThreads = kMaxWarps * 32;
inline constexpr int kStages = 3;            // cp.async ring depth (2 steps in flight while one computes)
inline constexpr int kStepElems = 256;       // K per warp step: one super-block, or 8 / 4 small blocks
inline constexpr int kStepChunks = kStepElems / 32;
inline constexpr int kActBlockBytes = 36;    // q8_1
// One step's activation blocks of one window row. A step starts at chunk 8 s, byte 288 s of a
// 16-byte aligned row, so the segment is 16-byte aligned and needs no cover. 288 = 32 mod 128:
// rows t = 0..3 read by one instruction start on different bank quads.
inline constexpr int kActStepBytes = kStepChunks * kActBlockBytes;
static_assert(kActStepBytes % 16 == 0 && kActStepBytes % 128 == 32, "activation step layout");

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

// One ring stage of one warp: its 16 * MT row segments, then the T activation segments.
template <Type T, int MT>
constexpr int stage_bytes(int t_rows) {
  return 16 * MT * Geometry<T>::kSlot + t_rows * kActStepBytes;
}

// Dynamic shared memory of a CTA of `warps` warps: the grid table, one ring per warp, and one
// accumulator tile per warp for the K-part reduction.
template <Type T, int MT>
constexpr size_t smem_bytes(int warps, int t_rows) {
  const size_t ring = static_cast<size_t>(kStages) * stage_bytes<T, MT>(t_rows);
  const size_t reduce = static_cast<size_t>(MT) * 4 * 32 * sizeof(float);
  return Geometry<T>::kTableBytes + static_cast<size_t>(warps) * (ring + reduce);
}

__device__ __forceinline__ const uint8_t* align_down16(const uint8_t* p) {
  return reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) & ~static_cast<uintptr_t>(15));
}
__device__ __forceinline__ int misalign16(const void* p) { return static_cast<int>(reinterpret_cast<uintptr_t>(p) & 15); }

// Copies [seg, seg + len) into dst (16-byte aligned) as whole 16-byte pieces of its aligned cover,
// pieces first .. first + step*k: piece i of the cover lands at dst + 16 i, so the segment starts
// at dst + misalign16(seg). Never reads past seg + len. kWeights only picks the source line of the
// copy: tools/pdl_audit.py accepts a copy issued before pdl_wait() by its line, and only weights may be.
template <bool kWeights>
__device__ __forceinline__ void stage_piece(uint8_t* dst, const uint8_t* seg, int len, int piece) {
  const uint8_t* src = align_down16(seg) + 16 * piece;
  const int avail = static_cast<int>((seg + len) - src);
  if (avail <= 0) return;
  if constexpr (kWeights) cp_async16(dst + 16 * piece, src, avail < 16 ? avail : 16);  // pdl-pre-wait: weights
  else cp_async16(dst + 16 * piece, src, avail < 16 ? avail : 16);
}

// The codes of a live row's group, zero for a row past the matrix's end. The dead row's slot holds
// stale bytes; decoding and discarding them keeps the chunk code free of branches, and every table
// index a decoder forms is in range whatever the bytes are.
template <class Q>
__device__ __forceinline__ qd::Group live_group(const uint8_t* b, int ch, int q, const qd::Tables& tb, bool live) {
  const qd::Group v = Q::group(b, ch, q, tb);
  return {live ? v.lo : 0u, live ? v.hi : 0u};
}
// A live row's scale or min, 0 for a dead row (a select: the stale value may be any float).
__device__ __forceinline__ float live_value(bool live, float v) { return live ? v : 0.0f; }

// Launched with blockDim.x = 32 * groups * ksplit; CTA b owns row groups b * groups .. + groups - 1.
template <Type T, int MT>
__global__ void __launch_bounds__(kMaxThreads) mmvq_decode_kernel(const Shape p, const int ksplit) {
  using Q = qd::Dec<T>;
  using G = Geometry<T>;
  extern __shared__ __align__(16) uint8_t smem[];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int nwarps = static_cast<int>(blockDim.x) >> 5;
  const int kp = warp % ksplit, mg = warp / ksplit;
  const int groups = nwarps / ksplit;
  const int r0 = (static_cast<int>(blockIdx.x) * groups + mg) * 16 * MT;  // first row of this warp's group
  const int nsteps = (p.nchunks + kStepChunks - 1) / kStepChunks;        // 256-element steps per row
  // Steps kp, kp + ksplit, ... < nsteps (warp-uniform; 0 for a warp past the last row).
  const int my_steps = r0 < p.rows && kp < nsteps ? (nsteps - 1 - kp) / ksplit + 1 : 0;
  const int sbytes = stage_bytes<T, MT>(p.T);
  const int w_bytes = 16 * MT * G::kSlot;
  uint8_t* ring = smem + G::kTableBytes + warp * kStages * sbytes;
  float* red = reinterpret_cast<float*>(smem + G::kTableBytes + nwarps * kStages * sbytes);

  // Stage j of this warp: step sb = kp + j * ksplit of its rows (issue_weights) and of the
  // window's activations (issue_act).
  const auto issue_weights = [&](int j) {
    uint8_t* st = ring + (j % kStages) * sbytes;
    const int sb = kp + j * ksplit;
    const int64_t off = static_cast<int64_t>(sb) * G::kStepBytes;
    const int len = static_cast<int>(p.row_bytes - off < G::kStepBytes ? p.row_bytes - off : G::kStepBytes);
    for (int i = lane; i < 16 * MT * G::kPieces; i += 32) {
      const int rr = i / G::kPieces, piece = i % G::kPieces;
      const uint8_t* seg = p.w + (r0 + rr) * p.row_bytes + off;
      if (r0 + rr < p.rows) stage_piece<true>(st + rr * G::kSlot, seg, len, piece);
    }
  };
  const auto issue_act = [&](int j) {
    uint8_t* st = ring + (j % kStages) * sbytes;
    const int sb = kp + j * ksplit;
    const int c0 = sb * kStepChunks;
    const int alen = (p.nchunks - c0 < kStepChunks ? p.nchunks - c0 : kStepChunks) * kActBlockBytes;
    constexpr int kActPieces = kActStepBytes / 16;
    for (int i = lane; i < p.T * kActPieces; i += 32) {
      const int t = i / kActPieces, piece = i % kActPieces;
      stage_piece<false>(st + w_bytes + t * kActStepBytes, p.act + t * p.act_stride + c0 * kActBlockBytes, alen, piece);
    }
  };
  const auto issue = [&](int j) {
    issue_weights(j);
    issue_act(j);
  };

  float acc[MT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
    for (int i = 0; i < 4; ++i) acc[m][i] = 0.0f;

  // The math of stage j (its copies have landed and are visible to the whole warp).
  const auto compute = [&](int j, const qd::Tables& tb) {
    const uint8_t* st = ring + (j % kStages) * sbytes;
    const int sb = kp + j * ksplit;
    const int64_t off = static_cast<int64_t>(sb) * G::kStepBytes;

    // Activation rows this lane reads: t = g for the B fragment, t = 2q, 2q+1 for the scales.
    const uint8_t* ast = st + w_bytes;
    const auto act_row = [&](int t) { return ast + t * kActStepBytes; };
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
        rowp[m][h] = st + rr * G::kSlot + misalign16(p.w + (r0 + rr) * p.row_bytes + off);
      }
    // Q4_K / Q5_K / IQ4_XS: the step is one block, 16-byte (8-byte for IQ4_XS) aligned in the
    // slot: p.w is 16-byte aligned, row_bytes and the step offset are multiples of TS = 144 / 176
    // (multiples of 16) or 136 (a multiple of 8), the slot keeps the offset mod 16, and every slot
    // and stage size is a multiple of 16. So the head is read once per step with one wide load and
    // the codes with 8-byte loads (quant_decode.cuh, kWideDecode).
    qd::WideHead head[MT][2];
    if constexpr (qd::kWideDecode<T>) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) head[m][h] = qd::wide_head<T>(rowp[m][h]);
    }
    const auto row_group = [&](const uint8_t* b, int ch, bool live) -> qd::Group {
      if constexpr (qd::kWideDecode<T>) {
        const qd::Group v = qd::wide_group<T>(b, ch, q);
        return {live ? v.lo : 0u, live ? v.hi : 0u};
      } else {
        return live_group<Q>(b, ch, q, tb, live);
      }
    };
    const auto row_scale = [&](const uint8_t* b, int m, int h, int ch) -> float {
      if constexpr (qd::kWideDecode<T>) {
        return qd::wide_scale<T>(head[m][h], ch);
      } else {
        return Q::scale(b, ch, 0);
      }
    };
    const auto row_min = [&](const uint8_t* b, int m, int h, int ch) -> float {
      if constexpr (qd::kWideDecode<T>) {
        return qd::wide_min<T>(head[m][h], ch);
      } else {
        return Q::min(b, ch);
      }
    };

    // One 32-element chunk: decode, one (or two) mma, scale into the accumulators. Branch-free,
    // so that the compiler can overlap the loads of the next chunks with this one's math.
    const auto chunk = [&](const int cc) {
      const int ab = cc * kActBlockBytes;  // the stage's activations start at chunk sb * 8
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
        if constexpr (!Q::kSplit) {
          const qd::Group ga = row_group(ba, ch, row_live[m][0]);
          const qd::Group gb = row_group(bb, ch, row_live[m][1]);
          int c[4] = {0, 0, 0, 0};
          const int a[4] = {static_cast<int>(ga.lo), static_cast<int>(gb.lo), static_cast<int>(ga.hi), static_cast<int>(gb.hi)};
          mma_s8_16x8x32(c, a, b);
          const float sa = live_value(row_live[m][0], row_scale(ba, m, 0, ch));
          const float sbb = live_value(row_live[m][1], row_scale(bb, m, 1, ch));
          acc[m][0] = fmaf(sa * da0, static_cast<float>(c[0]), acc[m][0]);
          acc[m][1] = fmaf(sa * da1, static_cast<float>(c[1]), acc[m][1]);
          acc[m][2] = fmaf(sbb * da0, static_cast<float>(c[2]), acc[m][2]);
          acc[m][3] = fmaf(sbb * da1, static_cast<float>(c[3]), acc[m][3]);
          if constexpr (Q::kMin) {
            const float ma = live_value(row_live[m][0], row_min(ba, m, 0, ch));
            const float mb = live_value(row_live[m][1], row_min(bb, m, 1, ch));
            acc[m][0] = fmaf(ma, s0, acc[m][0]);
            acc[m][1] = fmaf(ma, s1, acc[m][1]);
            acc[m][2] = fmaf(mb, s0, acc[m][2]);
            acc[m][3] = fmaf(mb, s1, acc[m][3]);
          }
        } else {
          static_assert(!Q::kMin, "no split-scale type has a min");
          const qd::Group ga = live_group<Q>(ba, ch, q, tb, row_live[m][0]);
          const qd::Group gb = live_group<Q>(bb, ch, q, tb, row_live[m][1]);
          // Half 0 = groups 0-1 (lanes q < 2), half 1 = groups 2-3.
          const bool first = q < 2;
          const int a_lo[4] = {first ? static_cast<int>(ga.lo) : 0, first ? static_cast<int>(gb.lo) : 0,
                               first ? static_cast<int>(ga.hi) : 0, first ? static_cast<int>(gb.hi) : 0};
          const int a_hi[4] = {first ? 0 : static_cast<int>(ga.lo), first ? 0 : static_cast<int>(gb.lo),
                               first ? 0 : static_cast<int>(ga.hi), first ? 0 : static_cast<int>(gb.hi)};
          int c0h[4] = {0, 0, 0, 0}, c1h[4] = {0, 0, 0, 0};
          mma_s8_16x8x32(c0h, a_lo, b);
          mma_s8_16x8x32(c1h, a_hi, b);
          const float sa0 = live_value(row_live[m][0], Q::scale(ba, ch, 0));
          const float sa1 = live_value(row_live[m][0], Q::scale(ba, ch, 1));
          const float sb0 = live_value(row_live[m][1], Q::scale(bb, ch, 0));
          const float sb1 = live_value(row_live[m][1], Q::scale(bb, ch, 1));
          acc[m][0] = fmaf(sa1 * da0, static_cast<float>(c1h[0]), fmaf(sa0 * da0, static_cast<float>(c0h[0]), acc[m][0]));
          acc[m][1] = fmaf(sa1 * da1, static_cast<float>(c1h[1]), fmaf(sa0 * da1, static_cast<float>(c0h[1]), acc[m][1]));
          acc[m][2] = fmaf(sb1 * da0, static_cast<float>(c1h[2]), fmaf(sb0 * da0, static_cast<float>(c0h[2]), acc[m][2]));
          acc[m][3] = fmaf(sb1 * da1, static_cast<float>(c1h[3]), fmaf(sb0 * da1, static_cast<float>(c0h[3]), acc[m][3]));
        }
      }
    };

    const int nc = p.nchunks - sb * kStepChunks < kStepChunks ? p.nchunks - sb * kStepChunks : kStepChunks;
    // Warp-uniform; a short step is only the last one of a 32/64-element type (a 256-element
    // type's steps are always whole, and it never compiles the runtime-indexed loop).
    if (G::kChunksPerBlock == kStepChunks || nc == kStepChunks) {
#pragma unroll
      for (int cc = 0; cc < kStepChunks; ++cc) chunk(cc);
    } else {
#pragma unroll 1
      for (int cc = 0; cc < nc; ++cc) chunk(cc);
    }
  };


  // PDL (launch.cuh): before pdl_wait() only weights and the constant grid table are read. The
  // CTA's whole weight slice is prefetched toward L2 and the ring's first weight stages are
  // requested, so the weight stream starts while the previous kernel drains; the activations
  // (written by that kernel) are staged after the wait. The weight copies of stages 0..kStages-2
  // land in commit group 0 together with stage 0's activations, so group j still completes stage
  // j: waiting for it waits for no less than before.
  pdl_launch_dependents();
  {
    const int cta_row0 = static_cast<int>(blockIdx.x) * groups * 16 * MT;
    const int cta_rows = p.rows - cta_row0 < groups * 16 * MT ? p.rows - cta_row0 : groups * 16 * MT;
    if (cta_rows > 0) prefetch_l2(p.w + static_cast<int64_t>(cta_row0) * p.row_bytes, static_cast<int64_t>(cta_rows) * p.row_bytes);
  }
  for (int s = 0; s < kStages - 1; ++s)
    if (s < my_steps) issue_weights(s);  // pdl-pre-wait: weights
  // The type's grid table (constant data, like the weights); the barrier below publishes it (the
  // only one before the reduction: from there each warp paces itself).
  if constexpr (G::kTableBytes > 0) {
    const uint4* src = static_cast<const uint4*>(qd::GridTable<Q::kGrid>::ptr());
    for (int i = threadIdx.x; i < G::kTableBytes / 16; i += static_cast<int>(blockDim.x))
      reinterpret_cast<uint4*>(smem)[i] = src[i];  // pdl-pre-wait: constant table
  }
  pdl_wait();
  // Fill the ring's activations.
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < my_steps) issue_act(s);
    cp_async_commit();
  }
  __syncthreads();
  const qd::Tables tb = qd::tables_at<Q::kGrid>(smem);

  for (int j = 0; j < my_steps; ++j) {
    if (j + kStages - 1 < my_steps) issue(j + kStages - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncwarp();  // every lane's copies of stage j visible to the warp
    compute(j, tb);
    __syncwarp();  // stage j's slot may be refilled by the next iteration's issue
  }

  // Sum the K-parts of each row group in order kp = 0, 1, ... and write y.
  if (ksplit > 1) {  // CTA-uniform
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
}

// The rows one warp owns. [TAG_MMVQ_MT] MT = 1: MT = 2 halves the activation reads per weight
// byte but also the number of row groups, which the model's small shapes cannot spare.
inline constexpr int kMT = 1;

// The launch cost model behind plan_quant, in units of one warp step (16 rows x 256 elements).
//   * A warp alone finishes a step per unit at best (latency bound), and pays kFillSteps units
//     before its first step lands.
//   * An SM finishes at most kSmStepsPerUnit warp steps per unit (bandwidth and issue bound).
// A configuration costs, per wave of resident CTAs, the larger of the two on its busiest SM.
//
// Why Q5_K ran at ~1.1 TB/s (GDN qkv 10240 x 2560, 18 MB, 16.3 us), and what changed:
//   * Bytes in flight were not the limit. The old model picked ksplit 2 (640 CTAs of 2 warps,
//     ~10 warps per SM, 5 steps each); each warp keeps 2 steps of 16 x 176 B = 2.8 KB in flight,
//     ~56 KB per SM, while 4.5 TB/s x ~0.8 us of loaded DRAM latency / 132 SMs needs ~27 KB.
//   * The time was the warps' own instruction chains: 16.3 us / (5 steps + 2 fill) is ~2.3 us per
//     step, ~4500 cycles for a warp's 8 chunks. Per chunk the old decode issued ~36 shared loads
//     (each 32-bit code word as two 16-bit loads, since Dec may only assume 2-byte aligned
//     blocks; the scale bytes, d and dmin byte by byte) and ~130 instructions: ~0.37 instructions
//     per weight byte, and shared-load issue alone (288 per step, 128 B/clock per SM) capped the
//     SM at ~19 GB/s, 2.5 TB/s for the GPU, before any latency.
//   * Fixes: (1) Q4_K / Q5_K / IQ4_XS decode from the aligned staged block (kWideDecode):
//     ~8 shared loads and ~86 instructions per chunk, ~0.25 instructions per byte, 18 MB -> ~4.5M
//     warp instructions, ~4.4 us of issue at 4 warp instructions per clock on 132 SMs: issue and
//     HBM (4.0 us) are now about even. (2) kSmStepsPerUnit 8 -> 12: at ~0.25 IPC per lone warp
//     (decode chains of shared loads and mma) an SM issuing ~3 IPC sustains ~12 concurrent warp
//     steps, so the plan now buys shorter chains with more warps per SM while they stay in one
//     wave: qkv -> ksplit 4 (640 CTAs x 4 warps, ~20 warps per SM, <= 3 steps each); z 6144 x
//     2560 -> ksplit 5 (2 steps each); out 2560 x 6144 -> ksplit 8 (3 steps); 640 x 2560 ->
//     ksplit 10 (every warp one step). (3) ksplit may be any 1..16 (not only powers of two), so a
//     10-step row (K = 2560) splits into equal parts. (4) PDL: launch and the first weight
//     stages overlap the previous kernel.
//   * Expected (T = 1): qkv ~6-7 us (2.6-3 TB/s), z ~4.5 us, out ~5.5 us, 640 x 2560 ~2.5-3 us
//     (latency: one step after the fill, no longer after a launch).
inline constexpr double kFillSteps = 2.0;
inline constexpr double kSmStepsPerUnit = 12.0;

struct LaunchShape {
  int64_t row_groups;
  int nsteps;
  int sm_count;
};

// The estimated cost of `groups` row groups x `ksplit`
// K-parts per CTA at `ctas_per_sm` resident CTAs per SM.
constexpr double launch_cost(const LaunchShape& s, int groups, int ksplit, int ctas_per_sm) {
  const int64_t ctas = (s.row_groups + groups - 1) / groups;
  const int64_t slots = static_cast<int64_t>(ctas_per_sm) * s.sm_count;
  const int64_t waves = (ctas + slots - 1) / slots;
  const int64_t per_wave = (ctas + waves - 1) / waves;
  const int64_t busiest = (per_wave + s.sm_count - 1) / s.sm_count;  // CTAs on the busiest SM
  const int steps = (s.nsteps + ksplit - 1) / ksplit;
  const double latency = steps + kFillSteps;
  const double bandwidth = static_cast<double>(busiest * groups * ksplit * steps) / kSmStepsPerUnit;
  return static_cast<double>(waves) * (latency > bandwidth ? latency : bandwidth);
}

// Launch choice (mmvq.cu): the (ksplit, groups) of lowest launch_cost that fits this device;
// ties go to the configuration that spreads over more SMs, then to fewer K-parts (less
// reduction). smem(warps, ksplit) is a CTA's dynamic shared memory.
Result<MmvqPlan> plan_split(const char* name, const void* kernel, const LaunchShape& s,
                            const std::function<size_t(int, int)>& smem, const DeviceCaps& caps);

template <Type T>
Result<MmvqPlan> plan_quant(const Shape& p, const DeviceCaps& caps) {
  const LaunchShape s{(static_cast<int64_t>(p.rows) + 16 * kMT - 1) / (16 * kMT), (p.nchunks + kStepChunks - 1) / kStepChunks,
                      caps.sm_count};
  const int t_rows = p.T;
  return plan_split("mmvq_decode_kernel", reinterpret_cast<const void*>(&mmvq_decode_kernel<T, kMT>), s,
                    [t_rows](int warps, int) { return smem_bytes<T, kMT>(warps, t_rows); }, caps);
}

template <Type T>
Status launch_quant(const Shape& p, const MmvqPlan& plan, cudaStream_t stream) {
  STRATA_CUDA_TRY(launch_kernel(&mmvq_decode_kernel<T, kMT>, dim3(static_cast<unsigned>(plan.grid)), dim3(static_cast<unsigned>(plan.threads)),
                                plan.smem_bytes, stream, p, plan.ksplit));
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
