// Full attention with the QSA indexer, decode form (spec/model.md §7), for a window of T = 1..8
// rows at positions pos .. pos + T - 1, where pos (the tokens cached before the window) lives in
// device memory so one captured graph serves every step. The decoder runs the projections with
// linear() (q -> qg, k, v, indexer q_proj -> iq, indexer k_proj -> ik), then:
//   attn_prep    q_norm + partial RoPE of the queries; k_norm + RoPE of the keys; K, V appended
//                to the cache; indexer queries normed + roped; raw index keys appended; the key of
//                every block the window completes pooled (fp32 mean), k_norm'ed and roped at its
//                first position into block_k
//   qsa_select   per row with more complete blocks than top_blocks: the block scores
//                (1/sqrt(d)) sum_h relu(q_h . kb) and the top_blocks best, ties to the lower
//                block index (src/reference/qsa.cpp); other rows are dense
//   attn_decode  softmax(q . k / sqrt(hd)) v over the selected blocks' tokens plus the tail
//                (or every visible token), GQA, then * sigmoid(gate) from qg
// The caches are fp32, sized for max_ctx tokens. Host-only header.
#pragma once

#include <cstdint>

#include "float_key.h"
#include "strata/common/status.h"
#include "strata/cuda/mmvq.h"

namespace strata::cuda {

struct AttnDims {
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  int n_rot = 0;              // rotary dims at the start of each head (rotate-half pairs i, i + n_rot/2)
  float rope_theta = 0.0f;
  float eps = 1e-6f;
  // QSA; ratio == 0: a dense block (no indexer tensors or compress ratio 0).
  int idx_heads = 0, idx_head_dim = 0, ratio = 0, top_blocks = 0;
  int64_t max_ctx = 0;
};

struct AttnCacheView {
  float* k = nullptr;        // [max_ctx, n_head_kv * head_dim], after k_norm and RoPE
  float* v = nullptr;        // [max_ctx, n_head_kv * head_dim]
  float* index_k = nullptr;  // [max_ctx, idx_head_dim], raw
  float* block_k = nullptr;  // [max_ctx / ratio, idx_head_dim], pooled, normed, roped
};

// qg: [T, n_head * 2 * head_dim], per head [query | gate]; k, v: [T, n_head_kv * head_dim];
// iq: [T, idx_heads * idx_head_dim]; ik: [T, idx_head_dim] (iq/ik/iq_norm/ik_norm unused when
// ratio == 0). Norm weights are f32 with the +1 folded in (plain rmsnorm * w).
// q_out: [T, n_head * head_dim]; qi_out: [T, idx_heads * idx_head_dim]. The *_stride fields are
// the floats between the rows t of qg, k and v (both), iq and ik, so the inputs may be slices of
// one concatenated projection output; 0 means the contiguous row length above.
struct AttnPrepArgs {
  const float* qg = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* iq = nullptr;
  const float* ik = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* iq_norm = nullptr;
  const float* ik_norm = nullptr;
  float* q_out = nullptr;
  float* qi_out = nullptr;
  int64_t qg_stride = 0, kv_stride = 0, iq_stride = 0, ik_stride = 0;
};
Status attn_prep(const AttnDims& d, const AttnPrepArgs& a, const int64_t* pos, int T, const AttnCacheView& cache,
                 Stream stream);

// scores: scratch [T, max_ctx / ratio]; sel: [T, top_blocks] chosen block ids ascending;
// n_sel[t] = the number of chosen blocks, or -1 when row t is dense. Nothing to do (all rows
// dense) when ratio == 0.
Status qsa_select(const AttnDims& d, const float* qi, const int64_t* pos, int T, const AttnCacheView& cache,
                  float* scores, int32_t* sel, int32_t* n_sel, Stream stream);

// Bytes of scratch attn_decode needs for a window of T rows (split-K partial results).
int64_t attn_decode_scratch_bytes(const AttnDims& d, int T);

// o: [T, n_head * head_dim] = attention output * sigmoid(gate). sel/n_sel from qsa_select (ignored
// when ratio == 0). qg rows at qg + t * qg_stride (0: contiguous). With o_q8, o's q8_1 rows too at
// o_q8 + t * o_q8_stride: the bytes quantize_q8_1 would write from o (no quantize launch).
Status attn_decode(const AttnDims& d, const float* q, const float* qg, const int64_t* pos, int T,
                   const AttnCacheView& cache, const int32_t* sel, const int32_t* n_sel, void* scratch, float* o,
                   Stream stream, int64_t qg_stride = 0, void* o_q8 = nullptr, int64_t o_q8_stride = 0);

// ---- shared by the kernels and the parity harness's host checks -------------------------------
#if defined(__CUDACC__)
#define STRATA_ATTN_HD __host__ __device__
#else
#define STRATA_ATTN_HD
#endif

namespace attn_detail {

// Largest supported query heads per kv head: a decode CTA keeps the output accumulators of the
// T x group query vectors of one kv head (at most kMaxWindowRows * kMaxGroup) in registers.
inline constexpr int kMaxGroup = 12;

// A score's key (float_key.h), so the top-k can select on the bits. Scores are never -0 (a sum
// of relu values that starts at +0).
STRATA_ATTN_HD inline uint32_t score_key(float x) { return float_key(x); }

// One radix-select step: hist[256] counts the candidates' current 8-bit digit; k_rem (>= 1) is
// how many of the best candidates are still wanted. Returns the digit of the k_rem-th largest
// and lowers k_rem by the candidates in higher digits (they are all taken).
STRATA_ATTN_HD inline int radix_pick(const int* hist, int& k_rem) {
  int above = 0;
  for (int bin = 255; bin > 0; --bin) {
    if (above + hist[bin] >= k_rem) {
      k_rem -= above;
      return bin;
    }
    above += hist[bin];
  }
  k_rem -= above;
  return 0;
}

// Split-K plan of a window that sees n_tot = pos + T tokens: `splits` CTAs per kv head, each
// covering `chunk` consecutive positions; split s covers [s * chunk, min((s + 1) * chunk, n_tot)).
// The first `active` splits have work.
struct SplitPlan {
  int64_t chunk = 0;
  int active = 0;
};
STRATA_ATTN_HD inline SplitPlan split_plan(int64_t n_tot, int splits) {
  SplitPlan p;
  const int64_t tile = 32;  // whole K/V tiles: a split's last tile is its only partial one
  p.chunk = ((n_tot + splits - 1) / splits + tile - 1) / tile * tile;
  if (p.chunk < tile) p.chunk = tile;
  p.active = static_cast<int>((n_tot + p.chunk - 1) / p.chunk);
  return p;
}

// Whether row t of a window starting at pos sees token `tok`: causal (tok <= pos + t), then for
// a sparse row (n_sel >= 0) only the chosen blocks and the tail (the incomplete block).
// chosen(b) answers whether block b is one of the row's chosen blocks.
template <class Chosen>
STRATA_ATTN_HD inline bool row_sees(int64_t tok, int64_t pos, int t, int ratio, int32_t n_sel, Chosen chosen) {
  const int64_t n_visible = pos + t + 1;
  if (tok >= n_visible) return false;
  if (ratio == 0 || n_sel < 0) return true;
  const int64_t b = tok / ratio;
  return b >= n_visible / ratio || chosen(b);
}

}  // namespace attn_detail

// Split-K CTAs per kv head of attn_decode: a function of the geometry only, so a captured graph
// is valid at every position (256 / n_head_kv, or STRATA_ATTN_SPLITS=N in 1..512, read once per
// process; attn_decode fails on a value outside that range).
int attn_decode_splits(const AttnDims& d);

}  // namespace strata::cuda
