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
constexpr int kSelectThreads = 1024;
constexpr int kSelectUnroll = 4;

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

// CTA c scores blocks 8c .. 8c + 7 for every sparse row. Thread (row t, block, head h, chain k)
// runs one of reference::dot's four accumulators; a second phase combines them as
// (s0 + s1) + (s2 + s3) and sums relu over the heads in head order, so each score is the
// reference's sequence of roundings exactly, only spread over 4 * nih threads.
__global__ void __launch_bounds__(kScoreThreads) qsa_score_kernel(ScoreArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  extern __shared__ double smem_d[];
  const int dp = score_row_stride(a.d);
  double* keys = smem_d;                      // [8, dp]
  double* q = keys + kBlocksPerCta * dp;      // [T * nih, dp]
  double* part = q + a.T * a.nih * dp;        // [T, 8, nih, 4] accumulators
  const int64_t pos = *a.pos;
  const int64_t nb_last = (pos + a.T) / a.ratio;  // the last row sees the most blocks
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * kBlocksPerCta;
  if (b0 >= nb_last || nb_last <= a.top_blocks) return;  // no block here, or every row dense
  for (int i = threadIdx.x; i < kBlocksPerCta * a.d; i += kScoreThreads) {
    const int bl = i / a.d, c = i % a.d;
    const int64_t b = b0 + bl;
    keys[bl * dp + c] = b < nb_last ? a.block_k[b * a.d + c] : 0.0;
  }
  const int qn = a.T * a.nih * a.d;
  for (int i = threadIdx.x; i < qn; i += kScoreThreads) q[i / a.d * dp + i % a.d] = a.qi[i];
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

// attn_detail::radix_pick over the 256 bins by warp 0 (a serial walk by one thread costs a few
// us per pass): lane L owns bins 8L .. 8L + 7, a suffix scan over the lanes gives the count
// above each lane's bins, and the highest lane holding a bin whose inclusive count from the top
// reaches k_rem has the pick (the largest such bin, as in radix_pick). Writes the bin and the
// lowered k_rem.
__device__ void radix_pick_warp(const int* hist, int k_rem, int* pick_bin, int* pick_rem) {
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x % 32;
  int h[8], own = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    h[j] = hist[8 * lane + j];
    own += h[j];
  }
  int incl = own;  // candidates in the bins of lanes >= lane
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_down_sync(full, incl, o);
    if (lane + o < 32) incl += n;
  }
  const int total = __shfl_sync(full, incl, 0);
  int cum = incl - own, found = -1, above_found = 0;
#pragma unroll
  for (int j = 7; j >= 0; --j) {
    if (found < 0 && cum + h[j] >= k_rem) {
      found = 8 * lane + j;
      above_found = cum;
    }
    cum += h[j];
  }
  const unsigned hit = __ballot_sync(full, found >= 0);
  if (hit == 0) {  // fewer candidates than k_rem (never for a consistent histogram): radix_pick's fallback
    if (lane == 0) {
      *pick_bin = 0;
      *pick_rem = k_rem - (total - h[0]);
    }
  } else if (lane == 31 - __clz(hit)) {
    *pick_bin = found;
    *pick_rem = k_rem - above_found;
  }
}

// One CTA per row. A dense row gets n_sel = -1. A sparse row: four 8-bit radix passes over the
// order-preserving keys find the key of the top_blocks-th largest score and how many of the
// scores equal to it are taken; a compaction in index order then writes every block above it
// and the first `need` equal ones, so the ids come out ascending.
__global__ void __launch_bounds__(kSelectThreads) qsa_topk_kernel(const float* __restrict__ scores, int64_t nb_cap,
                                                                  const int64_t* pos_p, int ratio, int top_blocks,
                                                                  int32_t* __restrict__ sel, int32_t* __restrict__ n_sel) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ int hist[256];
  __shared__ int warp_tot[32];
  __shared__ int pick_bin, pick_rem;
  const int t = blockIdx.x;
  const int64_t nb = (*pos_p + t + 1) / ratio;
  if (nb <= top_blocks) {
    if (threadIdx.x == 0) n_sel[t] = -1;
    return;
  }
  const float* row = scores + t * nb_cap;
  uint32_t prefix = 0, mask = 0;
  int k_rem = top_blocks;
  // Up to kSelectUnroll * kSelectThreads scores the keys stay in registers over the four passes
  // (one read of the row); longer rows are re-read each pass.
  uint32_t key[kSelectUnroll];
  const auto load_keys = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kSelectUnroll; ++u) {
      const int64_t i = base + u * kSelectThreads + threadIdx.x;
      key[u] = i < nb ? attn_detail::score_key(row[i]) : 0u;
    }
  };
  const bool resident = nb <= static_cast<int64_t>(kSelectUnroll) * kSelectThreads;
  if (resident) load_keys(0);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kSelectThreads) hist[i] = 0;
    __syncthreads();
    // Most scores share their top digits: the lanes of a warp with equal digits add once
    // (__match_any_sync), so a pass costs one shared atomic per distinct digit per warp. Four
    // loads are in flight per thread before the first is used.
    const int lane = threadIdx.x % 32;
    for (int64_t base = 0; base < nb; base += kSelectUnroll * kSelectThreads) {
      if (!resident) load_keys(base);
#pragma unroll
      for (int u = 0; u < kSelectUnroll; ++u) {
        if (base + u * kSelectThreads >= nb) break;  // CTA-uniform: no lane of this slice has a score
        const bool candidate = base + u * kSelectThreads + threadIdx.x < nb && (key[u] & mask) == prefix;
        const uint32_t digit = candidate ? (key[u] >> shift) & 0xFFu : 256u + lane;  // others never match
        const unsigned peers = __match_any_sync(0xffffffffu, digit);
        if (candidate && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) radix_pick_warp(hist, k_rem, &pick_bin, &pick_rem);
    __syncthreads();
    prefix |= static_cast<uint32_t>(pick_bin) << shift;
    mask |= 0xFFu << shift;
    k_rem = pick_rem;
    __syncthreads();  // hist and pick_* are rewritten by the next pass
  }
  const uint32_t thr = prefix;
  const int need_equal = k_rem;
  // Compaction in index order: thread i owns the run [i * run, (i + 1) * run), so two scans
  // (equal scores before the run, taken blocks before the run) place every id.
  const int64_t run = (nb + kSelectThreads - 1) / kSelectThreads;
  const int64_t r0 = min(nb, threadIdx.x * run), r1 = min(nb, r0 + run);
  int my_equal = 0;
  for (int64_t i = r0; i < r1; ++i) my_equal += attn_detail::score_key(row[i]) == thr;
  int total = 0;
  int equal_rank = block_exclusive_scan(my_equal, warp_tot, total);
  int my_take = 0;
  for (int64_t i = r0, e = equal_rank; i < r1; ++i) {
    const uint32_t key = attn_detail::score_key(row[i]);
    my_take += key > thr || (key == thr && e++ < need_equal);
  }
  int at = block_exclusive_scan(my_take, warp_tot, total);
  int32_t* out = sel + static_cast<int64_t>(t) * top_blocks;
  for (int64_t i = r0; i < r1; ++i) {
    const uint32_t key = attn_detail::score_key(row[i]);
    const bool take = key > thr || (key == thr && equal_rank++ < need_equal);
    if (take && at < top_blocks) out[at++] = static_cast<int32_t>(i);
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
