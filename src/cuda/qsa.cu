// qsa_select (attention.h): block scores of every sparse row, then a deterministic top-k per row.
//
// The scores are the reference's bit for bit (src/reference/qsa.cpp qsa_block_scores): each head
// dot runs in double with the four strided accumulators of reference::dot (a product of two
// floats is exact in double, so FMA contraction changes nothing), relu and the sum over heads in
// float in head order, then / sqrt(d). Equal scores are therefore equal on both sides and the
// selection, ties to the lower block index, is exact.
#include "attention.h"

#include <cmath>
#include <string>

#include "common.cuh"
#include "launch.cuh"

namespace strata::cuda {
namespace {

constexpr int kScoreThreads = 128;
constexpr int kBlocksPerCta = 8;  // 8 blocks a CTA: 136 CTAs for 1088 blocks, about one wave on 132 SMs
constexpr int kDotChains = 4;     // reference::dot's strided accumulators, one thread each

// Shared-memory row stride (doubles) of the widened keys and queries: >= d and = 4 mod 16, so
// the 16 lanes of a 64-bit phase (chain k = 0..3 of 4 consecutive rows) hit distinct banks.
__host__ __device__ inline int score_row_stride(int d) { return d + (20 - d % 16) % 16; }

// Accumulator `chain` of reference::dot (elements i = chain mod 4, in order; chain 0 also takes
// the n % 4 tail). The operands are floats already widened to double (once per CTA:
// float -> double conversions run at a fraction of the FMA rate). A product of two floats is
// exact in double, so FMA contraction changes nothing.
__device__ double dot_chain(const double* a, const double* b, int n, int chain) {
  double s = 0.0;
  const int n4 = n / kDotChains * kDotChains;
  for (int i = chain; i < n4; i += kDotChains) s += a[i] * b[i];
  if (chain == 0)
    for (int i = n4; i < n; ++i) s += a[i] * b[i];
  return s;
}

struct ScoreArgs {
  const float* qi;       // [T, nih * d], normed and roped
  const float* block_k;  // [nb_cap, d]
  const int64_t* pos;
  float* scores;         // [T, nb_cap]
  int T, nih, d, ratio, top_blocks;
  int64_t nb_cap;
  float sqrt_d;
};

// Widens rows 0 .. rows - 1 of src (d floats each, contiguous; rows >= 1) into dst's rows of dp
// doubles, a thread's column of kBatch rows loaded before any is stored: one memory round trip a
// batch (as a plain loop, ptxas kept four loads in flight, and a T = 1 CTA's keys and queries took
// three). Rows, not elements, so that no index needs a division by the runtime d. The loads past
// the last row read the last row again instead of being skipped: predicated loads were each moved
// next to their store by ptxas, one round trip a row.
template <int kBatch>
__device__ __forceinline__ void widen_rows(const float* src, int rows, int d, int dp, double* dst) {
  for (int r0 = 0; r0 < rows; r0 += kBatch) {
    for (int c = threadIdx.x; c < d; c += kScoreThreads) {
      float v[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) v[k] = src[static_cast<int64_t>(min(r0 + k, rows - 1)) * d + c];
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        if (r0 + k < rows) dst[(r0 + k) * dp + c] = v[k];
    }
  }
}

// CTA c scores blocks 8c .. 8c + 7 for every sparse row. Thread (row t, block, head h, chain k)
// runs one of reference::dot's four accumulators; a second phase combines them as
// (s0 + s1) + (s2 + s3) and sums relu over the heads in head order, so each score is the
// reference's sequence of roundings exactly, only spread over 4 * nih threads.
//
// pos and the keys of the blocks completed before the window (b < nb_done) are read before
// pdl_wait: pos is the host's copy ahead of the window's graph, which the window's first kernel
// waits for in full, and a block's key is written only by the window that completes it (a
// rejected draft's block is completed again by a later window, at b >= that window's nb_done).
// Their round trips then overlap the kernels ahead; after the wait come the queries and the keys
// of the blocks this window completes (attn_prep's), one round trip together.
__global__ void __launch_bounds__(kScoreThreads) qsa_score_kernel(ScoreArgs a) {
  pdl_launch_dependents();
  extern __shared__ double smem_d[];
  const int dp = score_row_stride(a.d);
  double* keys = smem_d;                      // [8, dp]
  double* q = keys + kBlocksPerCta * dp;      // [T * nih, dp]
  double* part = q + a.T * a.nih * dp;        // [T, 8, nih, 4] accumulators
  const int64_t pos = *a.pos;                 // pdl-pre-wait: window input
  const int64_t nb_last = (pos + a.T) / a.ratio;  // the last row sees the most blocks
  const int64_t nb_done = pos / a.ratio;          // blocks complete before the window
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * kBlocksPerCta;
  const bool idle = b0 >= nb_last || nb_last <= a.top_blocks;  // no block here, or every row dense
  // The CTA's key rows 0 .. k_old - 1 were complete before the window, k_old .. k_new - 1 are
  // completed by it, k_new .. 7 lie past nb_last (zeros). Used only when the CTA is not idle.
  const int k_new = static_cast<int>(nb_last - b0 < kBlocksPerCta ? nb_last - b0 : kBlocksPerCta);
  const int64_t done_here = nb_done - b0;
  const int k_old = done_here <= 0 ? 0 : done_here < k_new ? static_cast<int>(done_here) : k_new;
  const float* k0 = a.block_k + b0 * a.d;  // key row b0 + r at k0 + r * d
  if (!idle) {
    if (k_old > 0) widen_rows<kBlocksPerCta>(k0, k_old, a.d, dp, keys);  // pdl-pre-wait: keys complete before the window
    for (int i = k_new * a.d + threadIdx.x; i < kBlocksPerCta * a.d; i += kScoreThreads)
      keys[i / a.d * dp + i % a.d] = 0.0;
  }
  pdl_wait();
  if (idle) return;
  if (k_new > k_old) widen_rows<kBlocksPerCta>(k0 + k_old * a.d, k_new - k_old, a.d, dp, keys + k_old * dp);
  // 16 rows a batch: a T = 4 window's queries (4 indexer heads) in one round trip.
  widen_rows<16>(a.qi, a.T * a.nih, a.d, dp, q);
  __syncthreads();
  const int per_block = a.nih * kDotChains;
  for (int i = threadIdx.x; i < a.T * kBlocksPerCta * per_block; i += kScoreThreads) {
    const int k = i % kDotChains, h = i / kDotChains % a.nih;
    const int bl = i / per_block % kBlocksPerCta, t = i / (per_block * kBlocksPerCta);
    const int64_t b = b0 + bl;
    const int64_t nb = (pos + t + 1) / a.ratio;
    if (nb <= a.top_blocks || b >= nb) continue;
    part[i] = dot_chain(q + (t * a.nih + h) * dp, keys + bl * dp, a.d, k);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < a.T * kBlocksPerCta; i += kScoreThreads) {
    const int t = i / kBlocksPerCta, bl = i % kBlocksPerCta;
    const int64_t b = b0 + bl;
    const int64_t nb = (pos + t + 1) / a.ratio;
    if (nb <= a.top_blocks || b >= nb) continue;
    const double* s = part + static_cast<int64_t>(i) * per_block;
    float sum = 0.0f;
    for (int h = 0; h < a.nih; ++h, s += kDotChains) {
      const float dt = static_cast<float>((s[0] + s[1]) + (s[2] + s[3]));  // reference::dot's combine
      sum = __fadd_rn(sum, 0.0f < dt ? dt : 0.0f);                          // std::max(0.0f, dt)
    }
    a.scores[t * a.nb_cap + b] = __fdiv_rn(sum, a.sqrt_d);
  }
}

// The top-k CTA. Every pass of the radix select and the compaction are chains of dependent steps
// (count, barrier, pick), so the kernel is latency bound; the layout below keeps the chain short:
//   * a row of up to kResidentKeys blocks (a 32K context at ratio 4) is read from global memory
//     once, into shared memory; its first kEarlyKeys scores are loaded together with pos, before
//     nb is known, so a row up to an 8K context costs one global round trip in all;
//   * one barrier per pass: every warp runs the pick on the histogram itself (no broadcast
//     through shared memory and a second barrier), and the histograms rotate over three buffers so
//     a pass zeroes the next one while it counts, and no warp can still be reading the one zeroed;
//   * a pass whose picked bin holds exactly the keys still wanted ends the search: the remaining
//     digits cannot change which blocks are taken (on relu-sum scores mostly after the second or
//     third pass);
//   * the compaction walks each warp's contiguous chunk in 32-key steps with ballots, so a single
//     barrier (the warps' counts) places every id, and the ids are stored coalesced.
// 256 threads: the redundant picks read 8 KB of shared memory a pass and a barrier waits on 8
// warps, while the histogram work per SM is the same as with more threads.
constexpr int kSelectThreads = 256;
constexpr int kSelectWarps = kSelectThreads / 32;
constexpr int kRadixBins = 256;
constexpr int kResidentKeys = 8192;  // 32 KB of keys in shared memory
constexpr int kEarlySlices = 8;      // keys per thread loaded before pos: rows of nb <= 2048
constexpr int kEarlyKeys = kEarlySlices * kSelectThreads;
constexpr int kLateSlices = (kResidentKeys - kEarlyKeys) / kSelectThreads;
constexpr int kSharedSlices = 4;     // keys per thread per step of a pass over shared memory
constexpr int kStreamSlices = 16;    // loads in flight per thread over a row that does not fit
static_assert(kSelectThreads % 32 == 0 && kSelectWarps <= 32 && kResidentKeys % kSelectThreads == 0);

// The keys of one row: held in shared memory, or read from the scores in global memory each time.
struct SharedKeys {
  const uint32_t* keys;
  __device__ uint32_t operator()(int64_t i) const { return keys[i]; }
};
struct GlobalKeys {
  const float* row;
  __device__ uint32_t operator()(int64_t i) const { return attn_detail::score_key(row[i]); }
};

// Adds the current digit of every candidate ((key & mask) == prefix) among keys 0 .. nb - 1 to
// hist. Thread x sees keys x, x + kSelectThreads, ... (the ones it stored, for SharedKeys). The
// lanes of a warp with equal digits add once (__match_any_sync), so a slice costs one shared
// atomic per distinct digit; a slice without candidates (most of them after the first pass) skips
// the match. kSlices loads are in flight per thread before the first is used.
template <int kSlices, class Keys>
__device__ void count_digits(Keys keys, int64_t nb, uint32_t prefix, uint32_t mask, int shift, int* hist) {
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x % 32;
  for (int64_t base = 0; base < nb; base += static_cast<int64_t>(kSlices) * kSelectThreads) {
    uint32_t key[kSlices];
#pragma unroll
    for (int u = 0; u < kSlices; ++u) {
      const int64_t i = base + u * kSelectThreads + threadIdx.x;
      key[u] = i < nb ? keys(i) : 0u;
    }
#pragma unroll
    for (int u = 0; u < kSlices; ++u) {
      const bool candidate = base + u * kSelectThreads + threadIdx.x < nb && (key[u] & mask) == prefix;
      if (!__any_sync(full, candidate)) continue;  // warp-uniform
      const uint32_t digit = candidate ? (key[u] >> shift) & 0xFFu : 256u + lane;  // others never match
      const unsigned peers = __match_any_sync(full, digit);
      if (candidate && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
    }
  }
}

struct RadixPick {
  int bin;       // the digit of the k_rem-th largest candidate
  int k_rem;     // k_rem lowered by the candidates in higher digits
  bool settled;  // the bin holds exactly k_rem candidates: all of them are taken
};

// attn_detail::radix_pick over the 256 bins by one warp (every warp gets the same result): lane L
// owns bins 8L .. 8L + 7, a suffix scan over the lanes gives the count above each lane's bins, and
// the highest lane holding a bin whose inclusive count from the top reaches k_rem has the pick
// (the largest such bin, as in radix_pick).
__device__ RadixPick radix_pick_warp(const int* hist, int k_rem) {
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x % 32;
  const int4 lo = reinterpret_cast<const int4*>(hist)[2 * lane];
  const int4 hi = reinterpret_cast<const int4*>(hist)[2 * lane + 1];
  const int h[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  int own = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) own += h[j];
  int incl = own;  // candidates in the bins of lanes >= lane
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_down_sync(full, incl, o);
    if (lane + o < 32) incl += n;
  }
  int cum = incl - own, found = -1, above_found = 0, found_count = 0;
#pragma unroll
  for (int j = 7; j >= 0; --j) {
    if (found < 0 && cum + h[j] >= k_rem) {
      found = 8 * lane + j;
      above_found = cum;
      found_count = h[j];
    }
    cum += h[j];
  }
  const unsigned hit = __ballot_sync(full, found >= 0);
  if (hit == 0) {  // fewer candidates than k_rem (never for a consistent histogram): radix_pick's fallback
    const int total = __shfl_sync(full, incl, 0), bin0 = __shfl_sync(full, h[0], 0);
    return {0, k_rem - (total - bin0), false};
  }
  const int src = 31 - __clz(hit);
  const int bin = __shfl_sync(full, found, src);
  const int rem = k_rem - __shfl_sync(full, above_found, src);
  return {bin, rem, __shfl_sync(full, found_count, src) == rem};
}

// The cut: every key with (key & mask) > prefix is taken, and the first `need` keys (in index
// order) with (key & mask) == prefix. After four passes mask is ~0u and prefix the key of the
// top_blocks-th largest score; a settled pass stops with a shorter mask, and then `need` is the
// number of keys equal to prefix under it, so the same blocks are taken.
struct Cut {
  uint32_t prefix, mask;
  int need;
};

// Four 8-bit radix passes (fewer when one settles). hist[0] is zero on entry and every thread
// sees its own keys, so no barrier precedes the first pass. Pass p counts into hist[p % 3] and
// zeroes hist[(p + 1) % 3], last read by the picks of pass p - 2, which every warp finished
// before the barrier of pass p - 1.
template <int kSlices, class Keys>
__device__ Cut find_cut(Keys keys, int64_t nb, int top_blocks, int (*hist)[kRadixBins]) {
  Cut cut{0u, 0u, top_blocks};
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    int* counts = hist[pass % 3];
    for (int i = threadIdx.x; i < kRadixBins; i += kSelectThreads) hist[(pass + 1) % 3][i] = 0;
    count_digits<kSlices>(keys, nb, cut.prefix, cut.mask, shift, counts);
    __syncthreads();
    const RadixPick p = radix_pick_warp(counts, cut.need);
    cut.prefix |= static_cast<uint32_t>(p.bin) << shift;
    cut.mask |= 0xFFu << shift;
    cut.need = p.k_rem;
    if (p.settled) break;  // CTA-uniform: every warp picked from the same histogram
  }
  return cut;
}

// One step of a warp's walk: keys base + 32 u + lane (u < kSlices) under mask, 0 at or past hi; all
// loads issued before any is used.
template <int kSlices, class Keys>
__device__ __forceinline__ void load_step(Keys keys, int64_t base, int64_t hi, uint32_t mask, uint32_t (&key)[kSlices]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int u = 0; u < kSlices; ++u) {
    const int64_t i = base + 32 * u + lane;
    key[u] = i < hi ? keys(i) & mask : 0u;
  }
}

// Writes the taken ids ascending to out. Warp w owns keys [w * chunk, (w + 1) * chunk) and walks
// them 32 at a time: a first walk counts the keys above and equal to the cut, one barrier shares
// the warps' counts, and a second walk places each taken key at (keys above before it) +
// min(keys equal before it, need), with ballots for the ranks inside a step.
template <int kSlices, class Keys>
__device__ void write_taken(Keys keys, int64_t nb, Cut cut, int top_blocks, int32_t* out, int* warp_above,
                            int* warp_equal) {
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned lanes_below = (1u << lane) - 1u;
  const int64_t chunk = (nb + kSelectThreads - 1) / kSelectThreads * 32;
  const int64_t lo = min(nb, warp * chunk), hi = min(nb, lo + chunk);
  constexpr int64_t kStep = 32 * kSlices;
  int above = 0, equal = 0;
  for (int64_t base = lo; base < hi; base += kStep) {
    uint32_t key[kSlices];
    load_step<kSlices>(keys, base, hi, cut.mask, key);
#pragma unroll
    for (int u = 0; u < kSlices; ++u) {
      const bool valid = base + 32 * u + lane < hi;
      above += __popc(__ballot_sync(full, valid && key[u] > cut.prefix));
      equal += __popc(__ballot_sync(full, valid && key[u] == cut.prefix));
    }
  }
  if (lane == 0) {
    warp_above[warp] = above;
    warp_equal[warp] = equal;
  }
  __syncthreads();
  const int above_before = warp_sum_int(lane < warp ? warp_above[lane] : 0);
  int equal_seen = warp_sum_int(lane < warp ? warp_equal[lane] : 0);
  int at = above_before + min(equal_seen, cut.need);
  for (int64_t base = lo; base < hi; base += kStep) {
    uint32_t key[kSlices];
    load_step<kSlices>(keys, base, hi, cut.mask, key);
#pragma unroll
    for (int u = 0; u < kSlices; ++u) {
      const int64_t i = base + 32 * u + lane;
      const bool valid = i < hi;
      const bool equal_key = valid && key[u] == cut.prefix;
      const unsigned equal_mask = __ballot_sync(full, equal_key);
      const bool take =
          valid && (key[u] > cut.prefix || (equal_key && equal_seen + __popc(equal_mask & lanes_below) < cut.need));
      const unsigned take_mask = __ballot_sync(full, take);
      const int p = at + __popc(take_mask & lanes_below);
      if (take && p < top_blocks) out[p] = static_cast<int32_t>(i);
      at += __popc(take_mask);
      equal_seen += __popc(equal_mask);
    }
  }
}

// One CTA per row. A dense row gets n_sel = -1. A sparse row: radix passes over the
// order-preserving keys find the cut (the key of the top_blocks-th largest score and how many of
// the scores equal to it are taken); the compaction in index order then writes every block above
// it and the first `need` equal ones, so the ids come out ascending. `scores` and `pos` are
// written by earlier kernels: plain loads, after pdl_wait.
__global__ void __launch_bounds__(kSelectThreads) qsa_topk_kernel(const float* scores, int64_t nb_cap,
                                                                  const int64_t* pos_p, int ratio, int top_blocks,
                                                                  int32_t* __restrict__ sel, int32_t* __restrict__ n_sel) {
  pdl_launch_dependents();
  __shared__ uint32_t row_keys[kResidentKeys];
  __shared__ __align__(16) int hist[3][kRadixBins];
  __shared__ int warp_above[kSelectWarps], warp_equal[kSelectWarps];
  for (int i = threadIdx.x; i < kRadixBins; i += kSelectThreads) hist[0][i] = 0;
  __syncthreads();  // hist[0] is zero for the first pass; under PDL this waits alongside pdl_wait
  pdl_wait();
  const int t = blockIdx.x;
  const float* row = scores + t * nb_cap;
  // The first scores are loaded with pos, not after it: nb is not known yet, so threads past it
  // load scores of the row that are never used (in bounds: the row holds nb_cap).
  float early[kEarlySlices];
#pragma unroll
  for (int u = 0; u < kEarlySlices; ++u) {
    const int64_t i = u * kSelectThreads + threadIdx.x;
    early[u] = i < nb_cap ? row[i] : 0.0f;
  }
  const int64_t nb = (*pos_p + t + 1) / ratio;
  if (nb <= top_blocks) {
    if (threadIdx.x == 0) n_sel[t] = -1;
    return;
  }
  int32_t* out = sel + static_cast<int64_t>(t) * top_blocks;
  if (nb <= kResidentKeys) {
#pragma unroll
    for (int u = 0; u < kEarlySlices; ++u) {
      const int i = u * kSelectThreads + threadIdx.x;
      if (i < nb) row_keys[i] = attn_detail::score_key(early[u]);
    }
    if (nb > kEarlyKeys) {
      float late[kLateSlices];
#pragma unroll
      for (int u = 0; u < kLateSlices; ++u) {
        const int i = kEarlyKeys + u * kSelectThreads + threadIdx.x;
        late[u] = i < nb ? row[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kLateSlices; ++u) {
        const int i = kEarlyKeys + u * kSelectThreads + threadIdx.x;
        if (i < nb) row_keys[i] = attn_detail::score_key(late[u]);
      }
    }
    const SharedKeys keys{row_keys};
    const Cut cut = find_cut<kSharedSlices>(keys, nb, top_blocks, hist);
    write_taken<kSharedSlices>(keys, nb, cut, top_blocks, out, warp_above, warp_equal);
  } else {
    const GlobalKeys keys{row};
    const Cut cut = find_cut<kStreamSlices>(keys, nb, top_blocks, hist);
    write_taken<kStreamSlices>(keys, nb, cut, top_blocks, out, warp_above, warp_equal);
  }
  if (threadIdx.x == 0) n_sel[t] = top_blocks;
}

}  // namespace

Status qsa_select(const AttnDims& d, const float* qi, const int64_t* pos, int T, const AttnCacheView& cache,
                  float* scores, int32_t* sel, int32_t* n_sel, Stream stream) {
  if (d.ratio == 0) return Status::ok_status();
  if (T < 1 || T > kMaxWindowRows) return Status::error("qsa_select: T must be 1.." + std::to_string(kMaxWindowRows));
  if (d.ratio < 0 || d.idx_heads <= 0 || d.idx_head_dim <= 0 || d.top_blocks <= 0 || d.max_ctx <= 0 ||
      d.max_ctx % d.ratio != 0)
    return Status::error("qsa_select: needs ratio, idx_heads, idx_head_dim, top_blocks > 0 and max_ctx a multiple of ratio");
  if (d.max_ctx / d.ratio > INT32_MAX) return Status::error("qsa_select: max_ctx / ratio must fit int32");
  if (!qi || !pos || !cache.block_k || !scores || !sel || !n_sel)
    return Status::error("qsa_select: qi, pos, cache.block_k, scores, sel and n_sel are required");
  ScoreArgs a{};
  a.qi = qi;
  a.block_k = cache.block_k;
  a.pos = pos;
  a.scores = scores;
  a.T = T;
  a.nih = d.idx_heads;
  a.d = d.idx_head_dim;
  a.ratio = d.ratio;
  a.top_blocks = d.top_blocks;
  a.nb_cap = d.max_ctx / d.ratio;
  // src/reference/qsa.cpp: float(sqrt(double(d))).
  a.sqrt_d = static_cast<float>(std::sqrt(static_cast<double>(d.idx_head_dim)));
  const size_t smem = (static_cast<size_t>(kBlocksPerCta + T * a.nih) * score_row_stride(a.d) +
                       static_cast<size_t>(T) * kBlocksPerCta * a.nih * kDotChains) * sizeof(double);
  if (smem > 200 * 1024) return Status::error("qsa_select: idx_heads * idx_head_dim too large for the score kernel");
  const unsigned ctas = static_cast<unsigned>((a.nb_cap + kBlocksPerCta - 1) / kBlocksPerCta);
  STRATA_CUDA_TRY(cudaFuncSetAttribute(qsa_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  STRATA_CUDA_TRY(launch_kernel(qsa_score_kernel, dim3(ctas), dim3(kScoreThreads), smem, stream, a));
  STRATA_CUDA_TRY(launch_kernel(qsa_topk_kernel, dim3(T), dim3(kSelectThreads), 0, stream, scores, a.nb_cap, pos,
                                d.ratio, d.top_blocks, sel, n_sel));
  return Status::ok_status();
}

}  // namespace strata::cuda
