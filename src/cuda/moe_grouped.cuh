// grouped_mmvq_kernel: the routed experts' mat-vec per group (one expert and the window entries
// routed to it, at most T when each row's experts are distinct), quantized weights times the
// entries' q8_1 rows on int8 tensor cores.
// Included by the generated one-type instance files (build/.../moe_grouped_<type>.cu) and by
// moe_grouped.cu and moe_direct.h for the shared declarations; nothing else should include it.
//
// Shape of the work
//   * Block row y of the grid takes groups y, y + gridDim.y, ... below *n_groups (a device
//     scalar), so the grid never depends on how many groups a window has. Block column x is a row
//     tile of the group's expert: 8 / ksplit warps of 16 rows each, ksplit warps per row group
//     splitting K by 256-element steps (warp kp takes steps kp, kp + ksplit, ...).
//   * Per group (in batches of min(8, T) entries; 8 is the mma's column count) the CTA first
//     copies the entries' whole q8_1 activation rows into shared memory, gathered through act_row
//     (the token rows of u for gate/up, the entries' own h rows for down). Then each warp streams its 16 weight rows
//     step by step through a private kStages-deep cp.async ring and, per 32-element chunk, decodes
//     one group of 8 codes of rows g and g+8 per lane (quant_decode.cuh) into the A fragment;
//     the B fragment holds the batch's activations (column t = entry t, zero for t >= nb). So
//     every weight block is decoded once per group, whatever the group's size.
//   * K-parts are summed in order kp = 0, 1, ... through shared memory, so results are
//     deterministic and do not depend on the grid.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "launch.cuh"
#include "quant_decode.cuh"
#include "quant_tables.cuh"

namespace strata::cuda::moe_detail {

using quant::Type;

inline constexpr int kWarps = 8;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kStages = 3;       // per-warp cp.async ring (2 steps in flight while one computes)
inline constexpr int kStepElems = 256;  // K per warp step: one super-block, or 8 / 4 small blocks
inline constexpr int kStepChunks = kStepElems / 32;
inline constexpr int kBatch = 8;        // entries per mma: the B fragment's 8 columns
inline constexpr int kActBlockBytes = 36;  // q8_1

// What the host hands to the grouped kernels. Expert e's output row r (r < rows) is row
// e * stride0 + r of w0 when r < split, else row e * stride1 + (r - split) of w1 (gate and up as
// two tensors); single tensors set split = rows and w1 = w0.
struct GroupedArgs {
  const uint8_t* w0 = nullptr;
  const uint8_t* w1 = nullptr;
  int64_t row_bytes = 0;
  int rows = 0;
  int split = 0;
  int64_t stride0 = 0, stride1 = 0;
  int nchunks = 0;                 // K / 32
  const uint8_t* act = nullptr;    // activation rows: q8_1 blocks or floats
  int64_t act_stride = 0;          // bytes between activation rows (a multiple of 16)
  const int* act_row = nullptr;    // entry -> activation row; nullptr: the entry index itself
  float* out = nullptr;            // out[entry * out_stride + r]
  int64_t out_stride = 0;
  const int* n_groups = nullptr;   // device scalars and arrays of the grouping kernel
  const int* group_expert = nullptr;
  const int* group_start = nullptr;  // [n_groups + 1]: group g's entries are [start[g], start[g+1])
  int batch = kBatch;              // entries staged and multiplied at once: min(kBatch, T), since a
                                   // group has at most T entries when each row's experts are distinct
  int ksplit = 1;                  // 1, 2, 4 or 8
  // grouped_direct_kernel only (moe_direct.h): the activations given as each entry's gate | up
  // floats (rows of 2 * nchunks * 32, by entry); the kernel forms h = silu(gate) * up and its
  // q8_1 codes itself, and its CTAs of block column 0 also write them to h_out / h_q8_out.
  const float* swiglu_gu = nullptr;
  float* h_out = nullptr;
  uint8_t* h_q8_out = nullptr;
  int64_t h_q8_stride = 0;
  // PDL hand-off of the grouping (launch.cuh). With trigger_after_wait a launch lets its
  // dependents start only after its own pdl_wait(), so the grouping it waited for (its predecessor
  // wrote it) has completed, visibly, before any of them starts. The gate/up launch sets it, and
  // the down launch that follows it may then read the grouping before its own wait
  // (groups_settled; grouped_direct_kernel only) to pull its tile's weights toward L2 while
  // gate/up drains.
  bool trigger_after_wait = false;
  bool groups_settled = false;
};

// The start of a grouped launch, under the hand-off above: launch_dependents first unless the
// launch defers it to after the wait (grouped_launch_wait).
__device__ __forceinline__ void grouped_launch_start(const GroupedArgs& a) {
  if (!a.trigger_after_wait) pdl_launch_dependents();
}
__device__ __forceinline__ void grouped_launch_wait(const GroupedArgs& a) {
  pdl_wait();
  if (a.trigger_after_wait) pdl_launch_dependents();
}

__device__ __forceinline__ const uint8_t* weight_row(const GroupedArgs& a, int e, int r) {
  return r < a.split ? a.w0 + (static_cast<int64_t>(e) * a.stride0 + r) * a.row_bytes
                     : a.w1 + (static_cast<int64_t>(e) * a.stride1 + (r - a.split)) * a.row_bytes;
}

// Staged bytes for one row's step segment: its 16-byte aligned cover is at most step + 28 bytes
// (the segment starts 2-byte aligned). An odd multiple of 16 puts the 8 rows a warp reads at once
// on 8 different bank quads.
constexpr int row_slot_bytes(int step_bytes) {
  int s = (step_bytes + 28 + 15) & ~15;
  if ((s / 16) % 2 == 0) s += 16;
  return s;
}

// Staged bytes per activation row (a whole q8_1 row of K / 32 blocks), padded to 32 mod 128 so
// that the rows one instruction reads spread over the banks.
constexpr int act_slot_bytes(int nchunks) {
  int s = (nchunks * kActBlockBytes + 15) & ~15;
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
  static constexpr int kRingBytes = kStages * 16 * kSlot;  // one warp's ring
  static constexpr int kTableBytes = (qd::GridTable<Q::kGrid>::kBytes + 15) & ~15;
  static_assert(Q::QK <= kStepElems && kStepElems % Q::QK == 0, "a step must hold whole blocks");
};

// Shared memory: [grid table][batch activation rows][kWarps rings][K-part reduction].
template <Type T>
constexpr size_t smem_bytes(int nchunks, int batch) {
  using G = Geometry<T>;
  return static_cast<size_t>(G::kTableBytes) + static_cast<size_t>(batch) * act_slot_bytes(nchunks) +
         static_cast<size_t>(kWarps) * G::kRingBytes + static_cast<size_t>(kWarps) * 4 * 32 * sizeof(float);
}

__device__ __forceinline__ const uint8_t* align_down16(const uint8_t* p) {
  return reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(p) & ~static_cast<uintptr_t>(15));
}
__device__ __forceinline__ int misalign16(const void* p) { return static_cast<int>(reinterpret_cast<uintptr_t>(p) & 15); }

// Copies piece `piece` of the 16-byte aligned cover of [seg, seg + len) to dst + 16 * piece, so
// the segment starts at dst + misalign16(seg). Never reads past seg + len; the cover never starts
// before the tensor (its base is 16-byte aligned).
__device__ __forceinline__ void stage_piece(uint8_t* dst, const uint8_t* seg, int len, int piece) {
  const uint8_t* src = align_down16(seg) + 16 * piece;
  const int avail = static_cast<int>((seg + len) - src);
  if (avail > 0) cp_async16(dst + 16 * piece, src, avail < 16 ? avail : 16);
}

// One prefetch toward L2 of the 128-byte line holding p (launch.cuh's prefetch_l2 spreads one
// contiguous range over the CTA; a tile of an expert split into gate and up is two ranges).
__device__ __forceinline__ void prefetch_line_l2(const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

// At least 3 CTAs (24 warps) per SM: at <= 85 registers a thread. Left free, ptxas takes ~107
// once the tile prefetch is in, which would drop residency to 2 CTAs per SM and the decode
// group launch (10 groups x 20 tiles) to fewer warps than SMs need to hide the decode's latency.
template <Type T>
__global__ void __launch_bounds__(kThreads, 3) grouped_mmvq_kernel(const GroupedArgs a) {
  using Q = qd::Dec<T>;
  using G = Geometry<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  // PDL (launch.cuh). Which expert's rows this CTA streams is itself an output of the grouping
  // kernel (group_expert), so no weight can be prefetched before pdl_wait(); what overlaps the
  // previous kernel is this kernel's launch, its CTAs' set-up and the copy of the type's grid
  // table (constant data), issued here as the first cp.async of commit group 0.
  grouped_launch_start(a);
  if constexpr (G::kTableBytes > 0) {
    const uint8_t* src = static_cast<const uint8_t*>(qd::GridTable<Q::kGrid>::ptr());
    for (int i = threadIdx.x; i < G::kTableBytes / 16; i += kThreads)
      cp_async16(smem + 16 * i, src + 16 * i, 16);  // pdl-pre-wait: constant table
  }
  grouped_launch_wait(a);
  const int n_groups = *a.n_groups;
  if (static_cast<int>(blockIdx.y) >= n_groups) {  // CTA-uniform: no group for this block row
    cp_async_wait<0>();  // leave no copy in flight into the shared memory of an exiting CTA
    return;
  }

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int ksplit = a.ksplit, kp = warp % ksplit, mg = warp / ksplit;
  const int r0 = (static_cast<int>(blockIdx.x) * (kWarps / ksplit) + mg) * 16;  // this warp's first row
  const int nsteps = (a.nchunks + kStepChunks - 1) / kStepChunks;
  const int my_steps = kp < nsteps ? (nsteps - 1 - kp) / ksplit + 1 : 0;
  const int aslot = act_slot_bytes(a.nchunks);
  const int act_bytes = a.nchunks * kActBlockBytes;

  // The grid table copied above travels with the first batch's activation copies (the same
  // commit group), so the first batch's wait publishes it.
  const qd::Tables tb = qd::tables_at<Q::kGrid>(smem);
  uint8_t* act_st = smem + G::kTableBytes;
  uint8_t* ring = act_st + a.batch * aslot + warp * G::kRingBytes;
  float* red = reinterpret_cast<float*>(act_st + a.batch * aslot + kWarps * G::kRingBytes);

  for (int grp = blockIdx.y; grp < n_groups; grp += gridDim.y) {
    const int e = a.group_expert[grp];
    const int first = a.group_start[grp], last = a.group_start[grp + 1];
    {
      // The whole row tile of expert e toward L2 as soon as e is known: the rings keep only
      // kStages - 1 steps per warp in flight, so without this the later steps of a warp each wait
      // a DRAM round trip; with it the tile's DRAM reads all start now and later steps hit L2.
      const int tile_rows = kWarps / ksplit * 16, tile_r0 = static_cast<int>(blockIdx.x) * tile_rows;
      const int lines = static_cast<int>((a.row_bytes + 127) / 128);
      for (int i = threadIdx.x; i < tile_rows * lines; i += kThreads) {
        const int r = tile_r0 + i / lines;
        if (r < a.rows) prefetch_line_l2(weight_row(a, e, r) + 128 * (i % lines));
      }
    }
    // Each lane's two rows and where the current step of each starts in global memory.
    const bool live0 = r0 + g < a.rows, live1 = r0 + g + 8 < a.rows;
    const uint8_t* wrow0 = weight_row(a, e, live0 ? r0 + g : 0);
    const uint8_t* wrow1 = weight_row(a, e, live1 ? r0 + g + 8 : 0);

    // Step i of this warp (K step kp + i * ksplit) into ring slot i % kStages.
    const auto issue = [&](int i) {
      const int sb = kp + i * ksplit;
      const int64_t off = static_cast<int64_t>(sb) * G::kStepBytes;
      const int len = static_cast<int>(a.row_bytes - off < G::kStepBytes ? a.row_bytes - off : G::kStepBytes);
      uint8_t* slot = ring + (i % kStages) * 16 * G::kSlot;
      for (int j = lane; j < 16 * G::kPieces; j += 32) {
        const int rr = j / G::kPieces, piece = j % G::kPieces;
        if (r0 + rr < a.rows) stage_piece(slot + rr * G::kSlot, weight_row(a, e, r0 + rr) + off, len, piece);
      }
    };

    for (int b0 = first; b0 < last; b0 += a.batch) {
      const int nb = last - b0 < a.batch ? last - b0 : a.batch;
      __syncthreads();  // the previous batch's activations and reduction slots are no longer read
      const int apieces = (act_bytes + 15) / 16;
      for (int i = threadIdx.x; i < nb * apieces; i += kThreads) {
        const int t = i / apieces, piece = i % apieces;
        const int64_t row = a.act_row != nullptr ? a.act_row[b0 + t] : b0 + t;
        const int avail = act_bytes - 16 * piece;
        cp_async16(act_st + t * aslot + 16 * piece, a.act + row * a.act_stride + 16 * piece, avail < 16 ? avail : 16);
      }
      cp_async_commit();
      for (int s = 0; s < kStages - 1; ++s) {
        if (s < my_steps) issue(s);
        cp_async_commit();
      }
      cp_async_wait<kStages - 1>();  // this thread's activation copies have landed
      __syncthreads();               // ... and every thread's

      // Activation rows this lane reads: entry g for the B fragment, 2q and 2q+1 for the scales.
      const bool b_live = g < nb, d0_live = 2 * q < nb, d1_live = 2 * q + 1 < nb;
      const uint8_t* a_b = act_st + (b_live ? g : 0) * aslot;
      const uint8_t* a_d0 = act_st + (d0_live ? 2 * q : 0) * aslot;
      const uint8_t* a_d1 = act_st + (d1_live ? 2 * q + 1 : 0) * aslot;

      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int i = 0; i < my_steps; ++i) {
        if (i + kStages - 1 < my_steps) issue(i + kStages - 1);
        cp_async_commit();
        cp_async_wait<kStages - 1>();  // step i's copies (this lane's) have landed
        __syncwarp();                  // ... and the whole warp's

        const int sb = kp + i * ksplit;
        const int64_t off = static_cast<int64_t>(sb) * G::kStepBytes;
        const uint8_t* slot = ring + (i % kStages) * 16 * G::kSlot;
        const uint8_t* rowp0 = slot + g * G::kSlot + misalign16(wrow0 + off);
        const uint8_t* rowp1 = slot + (g + 8) * G::kSlot + misalign16(wrow1 + off);
        const int nc = a.nchunks - sb * kStepChunks < kStepChunks ? a.nchunks - sb * kStepChunks : kStepChunks;
#pragma unroll
        for (int cc = 0; cc < kStepChunks; ++cc) {
          if (cc >= nc) break;  // warp-uniform: only a short last step of a 32/64-element type
          const int ab = (sb * kStepChunks + cc) * kActBlockBytes;
          int b[2] = {0, 0};
          if (b_live) {
            b[0] = *reinterpret_cast<const int*>(a_b + ab + 4 + 8 * q);
            b[1] = *reinterpret_cast<const int*>(a_b + ab + 8 + 8 * q);
          }
          const float da0 = d0_live ? qd::f16_at(a_d0 + ab, 0) : 0.0f;
          const float da1 = d1_live ? qd::f16_at(a_d1 + ab, 0) : 0.0f;
          const int blk = cc / G::kChunksPerBlock, ch = cc % G::kChunksPerBlock;
          const uint8_t* ba = rowp0 + blk * Q::TS;
          const uint8_t* bb = rowp1 + blk * Q::TS;
          qd::Group ga{0, 0}, gb{0, 0};
          if (live0) ga = Q::group(ba, ch, q, tb);
          if (live1) gb = Q::group(bb, ch, q, tb);
          if constexpr (!Q::kSplit) {
            int c[4] = {0, 0, 0, 0};
            const int af[4] = {static_cast<int>(ga.lo), static_cast<int>(gb.lo), static_cast<int>(ga.hi),
                               static_cast<int>(gb.hi)};
            mma_s8_16x8x32(c, af, b);
            const float sa = live0 ? Q::scale(ba, ch, 0) : 0.0f;
            const float sbb = live1 ? Q::scale(bb, ch, 0) : 0.0f;
            acc[0] = fmaf(sa * da0, static_cast<float>(c[0]), acc[0]);
            acc[1] = fmaf(sa * da1, static_cast<float>(c[1]), acc[1]);
            acc[2] = fmaf(sbb * da0, static_cast<float>(c[2]), acc[2]);
            acc[3] = fmaf(sbb * da1, static_cast<float>(c[3]), acc[3]);
            if constexpr (Q::kMin) {
              // min x d_a x sum(q_a): the code sums of entries 2q, 2q+1 from one mma with A = ones.
              int cs[4] = {0, 0, 0, 0};
              const int ones[4] = {0x01010101, 0x01010101, 0x01010101, 0x01010101};
              mma_s8_16x8x32(cs, ones, b);
              const float s0 = da0 * static_cast<float>(cs[0]), s1 = da1 * static_cast<float>(cs[1]);
              const float ma = live0 ? Q::min(ba, ch) : 0.0f;
              const float mb = live1 ? Q::min(bb, ch) : 0.0f;
              acc[0] = fmaf(ma, s0, acc[0]);
              acc[1] = fmaf(ma, s1, acc[1]);
              acc[2] = fmaf(mb, s0, acc[2]);
              acc[3] = fmaf(mb, s1, acc[3]);
            }
          } else {
            static_assert(!Q::kMin, "no split-scale type has a min");
            // Half 0 = groups 0-1 (lanes q < 2), half 1 = groups 2-3: one mma per half.
            const bool lo_half = q < 2;
            const int a_lo[4] = {lo_half ? static_cast<int>(ga.lo) : 0, lo_half ? static_cast<int>(gb.lo) : 0,
                                 lo_half ? static_cast<int>(ga.hi) : 0, lo_half ? static_cast<int>(gb.hi) : 0};
            const int a_hi[4] = {lo_half ? 0 : static_cast<int>(ga.lo), lo_half ? 0 : static_cast<int>(gb.lo),
                                 lo_half ? 0 : static_cast<int>(ga.hi), lo_half ? 0 : static_cast<int>(gb.hi)};
            int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
            mma_s8_16x8x32(c0, a_lo, b);
            mma_s8_16x8x32(c1, a_hi, b);
            const float sa0 = live0 ? Q::scale(ba, ch, 0) : 0.0f, sa1 = live0 ? Q::scale(ba, ch, 1) : 0.0f;
            const float sb0 = live1 ? Q::scale(bb, ch, 0) : 0.0f, sb1 = live1 ? Q::scale(bb, ch, 1) : 0.0f;
            acc[0] = fmaf(sa1 * da0, static_cast<float>(c1[0]), fmaf(sa0 * da0, static_cast<float>(c0[0]), acc[0]));
            acc[1] = fmaf(sa1 * da1, static_cast<float>(c1[1]), fmaf(sa0 * da1, static_cast<float>(c0[1]), acc[1]));
            acc[2] = fmaf(sb1 * da0, static_cast<float>(c1[2]), fmaf(sb0 * da0, static_cast<float>(c0[2]), acc[2]));
            acc[3] = fmaf(sb1 * da1, static_cast<float>(c1[3]), fmaf(sb0 * da1, static_cast<float>(c0[3]), acc[3]));
          }
        }
        __syncwarp();  // slot i % kStages may be refilled by the next iteration's issue
      }

      // The K-parts of each row group, summed in order kp = 0, 1, ...; c[i] is row g + 8 (i >> 1),
      // entry 2q + (i & 1).
      if (ksplit > 1) {
        for (int i = 0; i < 4; ++i) red[(warp * 4 + i) * 32 + lane] = acc[i];
        __syncthreads();
        if (kp == 0) {
          for (int i = 0; i < 4; ++i) {
            float s = 0.0f;
            for (int k = 0; k < ksplit; ++k) s += red[((mg * ksplit + k) * 4 + i) * 32 + lane];
            acc[i] = s;
          }
        }
      }
      if (kp == 0) {
        for (int i = 0; i < 4; ++i) {
          const int row = r0 + g + 8 * (i >> 1), t = 2 * q + (i & 1);
          if (row < a.rows && t < nb) a.out[static_cast<int64_t>(b0 + t) * a.out_stride + row] = acc[i];
        }
      }
    }
  }
}

// What the launcher needs to know of the device.
struct DeviceInfo {
  int cc = 0;             // 10 * major + minor
  int sm_count = 0;
  size_t smem_optin = 0;  // dynamic shared memory per block after opt-in
};

// Launches grouped_mmvq_kernel<T> with group_rows block rows (a.ksplit is chosen here); fails when
// its shared memory exceeds the device's.
//
// ksplit in {1, 2, 4}: the fewest (waves x steps per warp) for the block rows' groups on this
// device (ties to the smaller split, which reduces less). Whatever it picks, the sums per K-part
// and their order are the same for every group, so the grid never changes a result's bits
// across windows with the same T.
template <Type T>
Status launch_grouped_q(GroupedArgs a, int group_rows, const DeviceInfo& dev, cudaStream_t stream) {
  const size_t smem = smem_bytes<T>(a.nchunks, a.batch);
  if (smem > dev.smem_optin)
    return Status::error("cuda: native_expert_grouped: K = " + std::to_string(a.nchunks * 32) + " needs " +
                         std::to_string(smem) + " bytes of shared memory, the device allows " + std::to_string(dev.smem_optin));
  const auto kernel = &grouped_mmvq_kernel<T>;
  if (smem > 48 * 1024)
    STRATA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int per_sm = 0;
  STRATA_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  const int64_t slots = static_cast<int64_t>(per_sm > 0 ? per_sm : 1) * dev.sm_count;
  const int nsteps = (a.nchunks + kStepChunks - 1) / kStepChunks;
  int64_t best_cost = -1;
  for (int ks = 1; ks <= 4; ks *= 2) {
    if (ks > 1 && ks > nsteps) break;
    const int64_t tiles = (a.rows + kWarps / ks * 16 - 1) / (kWarps / ks * 16);
    const int64_t ctas = tiles * group_rows;
    const int64_t cost = (ctas + slots - 1) / slots * ((nsteps + ks - 1) / ks);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      a.ksplit = ks;
    }
  }
  const int tile_rows = kWarps / a.ksplit * 16;
  const dim3 grid(static_cast<unsigned>((a.rows + tile_rows - 1) / tile_rows), static_cast<unsigned>(group_rows));
  STRATA_CUDA_TRY(launch_kernel(kernel, grid, dim3(kThreads), smem, stream, a));
  return Status::ok_status();
}

// One generated file per type instantiates launch_grouped_q (see src/cuda/CMakeLists.txt).
#define STRATA_MOE_GROUPED_DECLARE(name) \
  extern template Status launch_grouped_q<Type::name>(GroupedArgs, int, const DeviceInfo&, cudaStream_t);
STRATA_MMVQ_QUANT_TYPES(STRATA_MOE_GROUPED_DECLARE)
#undef STRATA_MOE_GROUPED_DECLARE

}  // namespace strata::cuda::moe_detail
