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

namespace strata::cuda {
namespace {

constexpr int kScoreThreads = 256;
constexpr int kBlocksPerCta = 32;
constexpr int kSelectThreads = 1024;
constexpr int kSelectUnroll = 4;

// reference::dot: four double accumulators over i % 4, combined as (s0 + s1) + (s2 + s3). The
// operands are floats already widened to double (once per CTA: float -> double conversions run
// at a fraction of the FMA rate).
__device__ float dot_ref(const double* a, const double* b, int n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return static_cast<float>((s0 + s1) + (s2 + s3));
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

// CTA c scores blocks 32c .. 32c + 31 for every sparse row; thread (row t, block) computes one
// score. Block keys sit in shared memory as doubles with rows padded to d + 1, so the lanes
// (blocks, same dim) of each half-warp phase hit distinct banks.
__global__ void __launch_bounds__(kScoreThreads) qsa_score_kernel(ScoreArgs a) {
  extern __shared__ double smem_d[];
  const int dp = a.d + 1;
  double* keys = smem_d;                    // [32, d + 1]
  double* q = smem_d + kBlocksPerCta * dp;  // [T, nih * d]
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
  for (int i = threadIdx.x; i < qn; i += kScoreThreads) q[i] = a.qi[i];
  __syncthreads();
  for (int i = threadIdx.x; i < a.T * kBlocksPerCta; i += kScoreThreads) {
    const int t = i / kBlocksPerCta, bl = i % kBlocksPerCta;
    const int64_t b = b0 + bl;
    const int64_t nb = (pos + t + 1) / a.ratio;
    if (nb <= a.top_blocks || b >= nb) continue;
    float sum = 0.0f;
    for (int h = 0; h < a.nih; ++h) {
      const float dt = dot_ref(q + (t * a.nih + h) * a.d, keys + bl * dp, a.d);
      sum = __fadd_rn(sum, 0.0f < dt ? dt : 0.0f);  // std::max(0.0f, dt)
    }
    a.scores[t * a.nb_cap + b] = __fdiv_rn(sum, a.sqrt_d);
  }
}

// One CTA per row. A dense row gets n_sel = -1. A sparse row: four 8-bit radix passes over the
// order-preserving keys find the key of the top_blocks-th largest score and how many of the
// scores equal to it are taken; a compaction in index order then writes every block above it
// and the first `need` equal ones, so the ids come out ascending.
__global__ void __launch_bounds__(kSelectThreads) qsa_topk_kernel(const float* __restrict__ scores, int64_t nb_cap,
                                                                  const int64_t* pos_p, int ratio, int top_blocks,
                                                                  int32_t* __restrict__ sel, int32_t* __restrict__ n_sel) {
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
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kSelectThreads) hist[i] = 0;
    __syncthreads();
    // Most scores share their top digits: the lanes of a warp with equal digits add once
    // (__match_any_sync), so a pass costs one shared atomic per distinct digit per warp. Four
    // loads are in flight per thread before the first is used.
    const int lane = threadIdx.x % 32;
    for (int64_t base = 0; base < nb; base += kSelectUnroll * kSelectThreads) {
      uint32_t key[kSelectUnroll];
#pragma unroll
      for (int u = 0; u < kSelectUnroll; ++u) {
        const int64_t i = base + u * kSelectThreads + threadIdx.x;
        key[u] = i < nb ? attn_detail::score_key(row[i]) : 0u;
      }
#pragma unroll
      for (int u = 0; u < kSelectUnroll; ++u) {
        const bool candidate = base + u * kSelectThreads + threadIdx.x < nb && (key[u] & mask) == prefix;
        const uint32_t digit = candidate ? (key[u] >> shift) & 0xFFu : 256u + lane;  // others never match
        const unsigned peers = __match_any_sync(0xffffffffu, digit);
        if (candidate && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int rem = k_rem;
      pick_bin = attn_detail::radix_pick(hist, rem);
      pick_rem = rem;
    }
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
  const size_t smem = (static_cast<size_t>(kBlocksPerCta) * (a.d + 1) + static_cast<size_t>(T) * a.nih * a.d) * sizeof(double);
  if (smem > 200 * 1024) return Status::error("qsa_select: idx_heads * idx_head_dim too large for the score kernel");
  const unsigned ctas = static_cast<unsigned>((a.nb_cap + kBlocksPerCta - 1) / kBlocksPerCta);
  STRATA_CUDA_TRY(cudaFuncSetAttribute(qsa_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  qsa_score_kernel<<<ctas, kScoreThreads, smem, stream>>>(a);
  STRATA_CUDA_TRY(cudaGetLastError());
  qsa_topk_kernel<<<T, kSelectThreads, 0, stream>>>(scores, a.nb_cap, pos, d.ratio, d.top_blocks, sel, n_sel);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

}  // namespace strata::cuda
