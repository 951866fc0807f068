// Full attention, decode form (attention.h): attn_prep (norms, RoPE, cache appends, block keys)
// and attn_decode (split-K softmax attention over the visible tokens, then the combine with the
// output gate). QSA block selection is in qsa.cu.
//
// Numerics follow src/reference/attention.cpp: sums of squares in double, normalise then scale,
// rotate-half RoPE with products and sums rounded separately (no FMA contraction), so prep
// matches the reference up to the last bit of cos/sin. inv_freq comes from the host with the
// reference's own expression: a 1-ulp difference in inv_freq moves the angle by pos * ulp.
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common.cuh"
#include "strata/cuda/switches.h"
#include "launch.cuh"
#include "q8_1.cuh"

namespace strata::cuda {
namespace {

using attn_detail::kMaxGroup;

constexpr int kMaxRotHalf = 64;   // n_rot <= 128
constexpr int kMaxVector = 512;   // longest head vector attn_prep normalises
constexpr int kPrepThreads = 128;

struct RopeFreqs {
  float inv_freq[kMaxRotHalf];
  int half = 0;
};

RopeFreqs rope_freqs(int n_rot, float theta) {
  RopeFreqs f{};
  f.half = n_rot / 2;
  for (int i = 0; i < f.half; ++i) {
    // src/reference/ops.cpp rope_angles: inv_freq = 1 / theta^(2i / n_rot), all fp32.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(n_rot);
    f.inv_freq[i] = 1.0f / std::pow(theta, expo);
  }
  return f;
}

// Sum over the CTA in a fixed order (warp butterflies, then the warp totals in order).
template <int kThreads>
__device__ double block_sum(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) total += red[w];
  return total;
}

// What a thread of norm_rope_store needs besides the vector itself, for its elements
// i = threadIdx.x + k * kPrepThreads: the norm weight and the RoPE cos / sin at position p. They
// depend only on weights and the position, so attn_prep_kernel forms them before its PDL wait.
constexpr int kPrepPerThread = kMaxVector / kPrepThreads;
struct RowOperands {
  float w[kPrepPerThread], c[kPrepPerThread], s[kPrepPerThread];
};

__device__ RowOperands row_operands(int n, const float* __restrict__ w, const RopeFreqs& rf, int64_t p) {
  RowOperands o{};
  const float fp = static_cast<float>(p);
#pragma unroll
  for (int k = 0; k < kPrepPerThread; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kPrepThreads;
    if (i >= n) break;
    o.w[k] = w[i];
    if (i < 2 * rf.half) {
      const int slot = i < rf.half ? i : i - rf.half;
      const float angle = __fmul_rn(fp, rf.inv_freq[slot]);
      // cos/sin in double, rounded once: the correctly rounded float the host's cosf/sinf give.
      o.c[k] = static_cast<float>(cos(static_cast<double>(angle)));
      o.s[k] = static_cast<float>(sin(static_cast<double>(angle)));
    }
  }
  return o;
}

// buf (n <= kMaxVector values in shared memory, written and synced by the caller) -> dst: rmsnorm
// * w, then rotate-half RoPE of the first 2 * rf.half dims, with the thread's operands o.
template <int kThreads>
__device__ void norm_rope_store(float* buf, int n, const RowOperands& o, float eps, const RopeFreqs& rf,
                                float* __restrict__ dst, double* red) {
  static_assert(kThreads == kPrepThreads, "RowOperands holds the elements of kPrepThreads threads");
  double ss = 0.0;
  for (int i = threadIdx.x; i < n; i += kThreads) ss += static_cast<double>(buf[i]) * buf[i];
  ss = block_sum<kThreads>(ss, red);
  const float mean = static_cast<float>(ss / static_cast<double>(n));
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
#pragma unroll
  for (int k = 0; k < kPrepPerThread; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    if (i < n) buf[i] = __fmul_rn(__fmul_rn(buf[i], r), o.w[k]);
  }
  __syncthreads();
  const int half = rf.half;
#pragma unroll
  for (int k = 0; k < kPrepPerThread; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    if (i >= n) break;
    float y = buf[i];
    if (i < 2 * half)
      y = i < half ? __fadd_rn(__fmul_rn(buf[i], o.c[k]), __fmul_rn(-buf[i + half], o.s[k]))
                   : __fadd_rn(__fmul_rn(buf[i], o.c[k]), __fmul_rn(buf[i - half], o.s[k]));
    dst[i] = y;
  }
}

struct PrepKernelArgs {
  AttnPrepArgs a;
  AttnCacheView cache;
  const int64_t* pos;
  int T, nh, nkv, hd, nih, id, ratio;
  int64_t max_ctx;
  float eps;
  int64_t qg_stride, kv_stride, iq_stride, ik_stride;  // floats between the rows of t (resolved, never 0)
};

// Block b's key: its raw index keys pooled (fp32 sum in token order, then / ratio), ik_norm,
// RoPE at the block's first position, into cache.block_k. Tokens before pos come from the cache,
// the window's own from ik (other CTAs of the launch append them to the cache: the same values).
__device__ void block_key_store(const PrepKernelArgs& p, const RopeFreqs& rf, const RowOperands& o, int64_t pos,
                                int64_t b, float* buf, double* red) {
  for (int a = threadIdx.x; a < p.id; a += kPrepThreads) {
    float sum = 0.0f;
    for (int r = 0; r < p.ratio; ++r) {
      const int64_t tok = b * p.ratio + r;
      const float v = tok < pos ? p.cache.index_k[tok * p.id + a] : p.a.ik[(tok - pos) * p.ik_stride + a];
      sum = __fadd_rn(sum, v);
    }
    buf[a] = __fdiv_rn(sum, static_cast<float>(p.ratio));
  }
  __syncthreads();
  norm_rope_store<kPrepThreads>(buf, p.id, o, p.eps, rf, p.cache.block_k + b * p.id, red);
}

// One CTA per head vector: T*nh queries, then T*nkv keys (with their values), then (QSA) T*nih
// indexer queries and T raw index keys; the CTA of a raw key that completes a block (its token the
// block's last) also forms the block's key (block_key_store), so no launch of its own follows.
//
// The CTA's role, pos and its threads' norm weights and RoPE cos / sin are formed before pdl_wait
// (pos is the host's copy ahead of the window's graph, which the window's first kernel waits for
// in full; the rest are weights), so that after the wait only the vector's loads and the norm's
// reduction remain on the step's path.
__global__ void __launch_bounds__(kPrepThreads) attn_prep_kernel(PrepKernelArgs p, RopeFreqs rf) {
  __shared__ float buf[kMaxVector];
  __shared__ double red[kPrepThreads / 32];
  pdl_launch_dependents();
  const int64_t pos = *p.pos;  // pdl-pre-wait: window input
  int i = blockIdx.x;
  enum { kQuery, kKey, kIndexQuery, kIndexKey } role;
  const float* w = nullptr;
  int n = 0, t = 0;
  bool completes_block = false;
  if (i < p.T * p.nh) {
    role = kQuery;
    t = i / p.nh;
    w = p.a.q_norm;
    n = p.hd;
  } else if ((i -= p.T * p.nh) < p.T * p.nkv) {
    role = kKey;
    t = i / p.nkv;
    w = p.a.k_norm;
    n = p.hd;
  } else if ((i -= p.T * p.nkv) < p.T * p.nih) {
    role = kIndexQuery;
    t = i / p.nih;
    w = p.a.iq_norm;
    n = p.id;
  } else {
    role = kIndexKey;
    t = i - p.T * p.nih;
    completes_block = (pos + t + 1) % p.ratio == 0;
    if (completes_block) {  // the block key's operands: ik_norm, RoPE at the block's first position
      w = p.a.ik_norm;
      n = p.id;
    }
  }
  const int64_t rope_pos = role == kIndexKey ? (pos + t) / p.ratio * p.ratio : pos + t;
  const RowOperands o = n > 0 ? row_operands(n, w, rf, rope_pos) : RowOperands{};  // pdl-pre-wait: weights
  pdl_wait();
  const float* src = nullptr;
  float* dst = nullptr;
  if (role == kQuery) {
    const int h = i % p.nh;
    src = p.a.qg + t * p.qg_stride + static_cast<int64_t>(h) * 2 * p.hd;
    dst = p.a.q_out + static_cast<int64_t>(t * p.nh + h) * p.hd;
  } else if (role == kKey) {
    if (pos + t >= p.max_ctx) return;  // the caller keeps pos + T <= max_ctx; never write past the cache
    const int64_t row = t * p.kv_stride + static_cast<int64_t>(i % p.nkv) * p.hd;
    const int64_t crow = ((pos + t) * p.nkv + i % p.nkv) * p.hd;
    for (int j = threadIdx.x; j < p.hd; j += kPrepThreads) p.cache.v[crow + j] = p.a.v[row + j];
    src = p.a.k + row;
    dst = p.cache.k + crow;
  } else if (role == kIndexQuery) {
    src = p.a.iq + t * p.iq_stride + static_cast<int64_t>(i % p.nih) * p.id;
    dst = p.a.qi_out + static_cast<int64_t>(t * p.nih + i % p.nih) * p.id;
  } else {
    if (pos + t >= p.max_ctx) return;
    for (int j = threadIdx.x; j < p.id; j += kPrepThreads)
      p.cache.index_k[(pos + t) * p.id + j] = p.a.ik[t * p.ik_stride + j];
    if (completes_block) block_key_store(p, rf, o, pos, (pos + t) / p.ratio, buf, red);
    return;
  }
  for (int j = threadIdx.x; j < n; j += kPrepThreads) buf[j] = src[j];
  __syncthreads();
  norm_rope_store<kPrepThreads>(buf, n, o, p.eps, rf, dst, red);
}

// ---- attn_decode ------------------------------------------------------------------------------

constexpr int kDecodeWarps = 16;
constexpr int kDecodeThreads = kDecodeWarps * 32;
constexpr int kTile = 32;              // tokens per K/V tile (one per lane in the score phase)
constexpr int kPvBatch = 4;            // tokens whose V float4s are read before their FMAs
static_assert(kPvBatch == 4);          // their weights are read as one float4
constexpr int kListCap = 2048;         // visible tokens listed at once per CTA
constexpr int kMaxQv = kMaxWindowRows * kMaxGroup;  // query vectors of one kv head in a window
// Query vectors whose partial dots are in shared memory at once: one per warp for the softmax.
// 16 x 16 x 32 floats (32 KB) is what fits beside the 96 query vectors of T = 8 at hd 256.
constexpr int kScoreChunk = kDecodeWarps;
// Floats per softmax-weight row: a multiple of 4 (the values phase reads 4 weights as a float4)
// whose float4 stride (9) is odd, so the 8 rows of one read land in distinct bank groups.
constexpr int kPStride = kTile + 4;
// CTAs of one window by default. Two waves on 132 SMs, yet shorter chunks per CTA measured faster
// than one wave of 128 (H200, 4096 tokens, bench/results/2026-12-01-hc-attn-arms: 5.342 -> 5.271 ms
// per token; 512 measured 5.370).
constexpr int kDefaultSplitsTotal = 256;
constexpr int kMaxSplits = kMaxAttnSplits;  // splits per kv head (STRATA_ATTN_SPLITS); attn_combine_kernel's bound
static_assert(kDefaultSplitsTotal <= kMaxSplits);

struct DecodeKernelArgs {
  const float* q;
  const int64_t* pos;
  const float* k;
  const float* v;
  const int32_t* n_sel;
  const uint32_t* bitmap;  // [T, words]: the chosen blocks of each sparse row
  int64_t words;
  float* part_o;  // [splits, T, nh, hd] unnormalised sums
  float* part_m;  // [splits, T, nh] running max
  float* part_l;  // [splits, T, nh] sum of exp
  int T, nh, nkv, hd, group, ratio, splits;
  float scale;
};

struct ScratchLayout {
  int64_t bitmap = 0, part_m = 0, part_l = 0, part_o = 0, total = 0;
};

int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

ScratchLayout scratch_layout(const AttnDims& d, int T) {
  const int64_t splits = attn_decode_splits(d);
  const int64_t words = d.ratio > 0 ? (d.max_ctx / d.ratio + 31) / 32 : 0;
  const int64_t rows = splits * T * d.n_head;
  ScratchLayout s;
  s.bitmap = 0;
  s.part_m = align256(T * words * 4);
  s.part_l = s.part_m + align256(rows * 4);
  s.part_o = s.part_l + align256(rows * 4);
  s.total = s.part_o + align256(rows * d.head_dim * 4);
  return s;
}

// Marks each sparse row's chosen blocks. One CTA per row; integer OR, so the result does not
// depend on the order.
__global__ void __launch_bounds__(256) chosen_bitmap_kernel(const int32_t* __restrict__ sel, int top_blocks,
                                                           const int32_t* __restrict__ n_sel, uint32_t* bitmap,
                                                           int64_t words) {
  pdl_launch_dependents();
  pdl_wait();
  const int t = blockIdx.x;
  const int ns = n_sel[t];
  if (ns < 0) return;  // dense row: the bitmap is not read
  uint32_t* row = bitmap + t * words;
  for (int64_t i = threadIdx.x; i < words; i += 256) row[i] = 0u;
  __syncthreads();
  for (int i = threadIdx.x; i < ns; i += 256) {
    const int32_t b = sel[static_cast<int64_t>(t) * top_blocks + i];
    if (b >= 0 && b / 32 < words) atomicOr(row + b / 32, 1u << (b % 32));
  }
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float4 axpy4(float a, float4 x, float4 y) {
  return make_float4(fmaf(a, x.x, y.x), fmaf(a, x.y, y.y), fmaf(a, x.z, y.z), fmaf(a, x.w, y.w));
}

// K tile rows are padded by one float4: in the score phase lane j reads row j, and the pad
// spreads 8 lanes' 16-byte reads over all 32 banks.
__host__ __device__ constexpr int k_stride4(int hd4) { return hd4 + 1; }

// Byte offsets of attn_split_kernel's shared arrays for qvs query vectors of head_dim hd; every
// offset stays a multiple of 16 (float4 arrays first, each a multiple of 16 bytes long).
struct DecodeSmemLayout {
  size_t q, k, v, part, p, m, l, alpha, list, masks, warp_tot, n_sel, total;
};
__host__ __device__ constexpr DecodeSmemLayout decode_smem_layout(int qvs, int hd) {
  const size_t hd4 = static_cast<size_t>(hd) / 4, n = static_cast<size_t>(qvs);
  DecodeSmemLayout s{};
  s.q = 0;                                            // float4 [qvs, hd4]
  s.k = s.q + n * hd4 * 16;                           // float4 [kTile, ks4]
  s.v = s.k + kTile * k_stride4(hd / 4) * 16;         // float4 [kTile, hd4]
  s.part = s.v + kTile * hd4 * 16;                    // float [kDecodeWarps, kScoreChunk, kTile]
  s.p = s.part + kDecodeWarps * kScoreChunk * kTile * 4;  // float [qvs, kPStride]
  s.m = s.p + n * kPStride * 4;                       // float [qvs] running max
  s.l = s.m + n * 4;                                  // float [qvs] running sum of exp
  s.alpha = s.l + n * 4;                              // float [qvs] this tile's rescale
  s.list = s.alpha + n * 4;                           // int32 [kListCap]
  s.masks = s.list + kListCap * 4;                    // uint8 [kListCap]
  s.warp_tot = s.masks + kListCap;                    // int [32]
  s.n_sel = s.warp_tot + 32 * 4;                      // int [kMaxWindowRows]
  s.total = s.n_sel + kMaxWindowRows * 4;
  return s;
}
static_assert(decode_smem_layout(kMaxQv, 256).total <= 227 * 1024, "over sm_90's opt-in shared memory per CTA");

size_t decode_smem_bytes(int T, int group, int hd) { return decode_smem_layout(T * group, hd).total; }

struct DecodeSmem {
  float4* q;
  float4* k;
  float4* v;
  float* part;   // partial dots of the current chunk: [warp][qv - chunk start][token]
  float* p;      // softmax weights: [qv][token], rows kPStride floats
  float* m;
  float* l;
  float* alpha;
  int32_t* list;
  uint8_t* masks;
  int* warp_tot;
  int* n_sel;
};

__device__ DecodeSmem carve_decode_smem(void* base, int qvs, int hd) {
  const DecodeSmemLayout lay = decode_smem_layout(qvs, hd);
  char* b = static_cast<char*>(base);
  return {reinterpret_cast<float4*>(b + lay.q),     reinterpret_cast<float4*>(b + lay.k),
          reinterpret_cast<float4*>(b + lay.v),     reinterpret_cast<float*>(b + lay.part),
          reinterpret_cast<float*>(b + lay.p),      reinterpret_cast<float*>(b + lay.m),
          reinterpret_cast<float*>(b + lay.l),      reinterpret_cast<float*>(b + lay.alpha),
          reinterpret_cast<int32_t*>(b + lay.list), reinterpret_cast<uint8_t*>(b + lay.masks),
          reinterpret_cast<int*>(b + lay.warp_tot), reinterpret_cast<int*>(b + lay.n_sel)};
}

// Head dims are split across the warps: warp w owns float4s [w * kD4, (w + 1) * kD4) of every K,
// V and query row (16 dims at hd 256, 8 at hd 128), for all query vectors, in both phases. Each
// K and V element is then read from shared memory by one warp per tile instead of by every warp.
template <int NC>
struct DimSplit {
  static constexpr int kHd4 = 32 * NC;                 // float4s per head vector
  static constexpr int kD4 = kHd4 / kDecodeWarps;      // float4s per warp
  static constexpr int kQvPerPass = 32 / kD4;          // query vectors one values pass covers
  static constexpr int kPasses = kMaxQv / kQvPerPass;  // accumulator float4s per lane at most
  static_assert(kHd4 % kDecodeWarps == 0 && 32 % kD4 == 0 && kMaxQv % kQvPerPass == 0);
};

// Scores, part 1: lane = token of the tile, holding its K slice (kk); for query vectors
// q0 .. q0 + qn - 1 the partial dot over this warp's dims (broadcast reads of the query slice)
// goes to part[warp][qv - q0][lane]. Four chains (one per float4 component), ascending float4.
template <int NC>
__device__ void score_partials(const DecodeSmem& sm, const float4 (&kk)[DimSplit<NC>::kD4], int q0, int qn,
                               int warp, int lane) {
  using D = DimSplit<NC>;
  const float4* qcol = sm.q + q0 * D::kHd4 + warp * D::kD4;
  float* out = sm.part + warp * kScoreChunk * kTile + lane;
  // 8 query float4s in flight at either head_dim; more only adds registers next to acc.
  constexpr int kUnroll = 8 / D::kD4;
#pragma unroll kUnroll
  for (int i = 0; i < qn; ++i) {
    const float4* qrow = qcol + i * D::kHd4;
    float4 qq[D::kD4];
#pragma unroll
    for (int u = 0; u < D::kD4; ++u) qq[u] = qrow[u];
    float4 s4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int u = 0; u < D::kD4; ++u) {
      s4.x = fmaf(qq[u].x, kk[u].x, s4.x);
      s4.y = fmaf(qq[u].y, kk[u].y, s4.y);
      s4.z = fmaf(qq[u].z, kk[u].z, s4.z);
      s4.w = fmaf(qq[u].w, kk[u].w, s4.w);
    }
    out[i * kTile] = (s4.x + s4.y) + (s4.z + s4.w);
  }
}

// Scores, part 2, by one warp for query vector qv (slot qv - q0 of the chunk, window row t),
// lane = token: the score is the sum of the warps' partial dots in ascending warp order; then the
// online-softmax step over the tokens row t sees (tok_mask, bit t). A row that sees no token of
// the tile keeps m and l and gets alpha = 1 and weights 0. m and l are only touched by this
// warp; alpha and the weights are read by every warp in the values phase.
__device__ void softmax_step(const DecodeSmem& sm, int qv, int slot, int t, unsigned tok_mask, float scale,
                             int lane) {
  const float* part = sm.part + slot * kTile + lane;
  float dot = 0.0f;
#pragma unroll
  for (int w = 0; w < kDecodeWarps; ++w) dot += part[w * kScoreChunk * kTile];
  const float score = ((tok_mask >> t) & 1u) ? dot * scale : -INFINITY;
  const float tile_max = warp_max(score);
  const float m_old = sm.m[qv];
  float alpha = 1.0f, pj = 0.0f, m_new = m_old, l_new = 0.0f;
  if (tile_max != -INFINITY) {
    m_new = fmaxf(m_old, tile_max);
    alpha = expf(m_old - m_new);
    pj = expf(score - m_new);
    l_new = sm.l[qv] * alpha + warp_sum(pj);
  }
  sm.p[qv * kPStride + lane] = pj;
  __syncwarp();  // every lane has read m[qv] and l[qv]
  if (lane == 0) {
    sm.alpha[qv] = alpha;
    if (tile_max != -INFINITY) {
      sm.m[qv] = m_new;
      sm.l[qv] = l_new;
    }
  }
}

// Values: lane owns float4 c4 = warp * kD4 + lane % kD4 of query vectors
// qv = lane / kD4 + kQvPerPass * k (acc[k]). acc = acc * alpha + sum_j p_j v_j, tokens in
// ascending j; a V float4 is shared by the kQvPerPass lanes that own it (one broadcast read), the
// weights of 4 tokens come as one float4. Tokens n_tile .. n_pv - 1 have weight 0 and zero-filled
// V rows, so they leave acc unchanged.
template <int NC>
__device__ void accumulate_values(const DecodeSmem& sm, float4 (&acc)[DimSplit<NC>::kPasses], int qvs, int n_tile,
                                  int warp, int lane) {
  using D = DimSplit<NC>;
  const int c4 = warp * D::kD4 + lane % D::kD4, qv0 = lane / D::kD4;
  const int passes = (qvs + D::kQvPerPass - 1) / D::kQvPerPass;
#pragma unroll
  for (int k = 0; k < D::kPasses; ++k) {
    if (k >= passes) break;
    const int qv = qv0 + D::kQvPerPass * k;
    const float a = qv < qvs ? sm.alpha[qv] : 1.0f;
    acc[k].x *= a;
    acc[k].y *= a;
    acc[k].z *= a;
    acc[k].w *= a;
  }
  const int n_pv = (n_tile + kPvBatch - 1) / kPvBatch * kPvBatch;
  for (int j = 0; j < n_pv; j += kPvBatch) {
    float4 vv[kPvBatch];
#pragma unroll
    for (int u = 0; u < kPvBatch; ++u) vv[u] = sm.v[(j + u) * D::kHd4 + c4];
#pragma unroll
    for (int k = 0; k < D::kPasses; ++k) {
      if (k >= passes) break;
      const int qv = qv0 + D::kQvPerPass * k;
      const float4 w4 = qv < qvs ? *reinterpret_cast<const float4*>(sm.p + qv * kPStride + j)
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      acc[k] = axpy4(w4.x, vv[0], acc[k]);
      acc[k] = axpy4(w4.y, vv[1], acc[k]);
      acc[k] = axpy4(w4.z, vv[2], acc[k]);
      acc[k] = axpy4(w4.w, vv[3], acc[k]);
    }
  }
}

// CTA (split s, kv head g): every query vector of kv head g (QV = T rows x group heads,
// qv = t * group + head) against the visible tokens of split s's positions. The CTA lists the
// positions some row sees (ascending), then walks the list in tiles of 32 tokens, so each K/V row
// is read from memory once for all T rows and group heads. Per tile, with the head dims split
// across warps (DimSplit):
//   scores   per chunk of 16 query vectors: each warp's partial dots over its dims (lane =
//            token), a barrier, then one warp per query vector sums them and takes the
//            online-softmax step (m, l, alpha, weights in shared memory);
//   values   each warp scales and accumulates its dims of every query vector in registers.
// Every K and V float4 is read from shared memory once per tile (by its warp); the query slices
// are broadcasts, QV x hd / 4 one-wavefront reads per tile, which is what dominates the
// shared-memory traffic at T = 8 (halving it needs a lane to score two tokens per query read).
// Fixed order throughout (partial dots summed in ascending warp order), so the result is
// deterministic.
template <int NC>
__global__ void __launch_bounds__(kDecodeThreads, 1) attn_split_kernel(DecodeKernelArgs p) {
  using D = DimSplit<NC>;
  extern __shared__ float4 smem4[];
  const int hd = p.hd, hd4 = D::kHd4, ks4 = k_stride4(hd4);
  const int QV = p.T * p.group;
  const DecodeSmem sm = carve_decode_smem(smem4, QV, hd);

  pdl_launch_dependents();
  pdl_wait();
  const int s = blockIdx.x, g = blockIdx.y;
  const int64_t pos = *p.pos;
  const attn_detail::SplitPlan plan = attn_detail::split_plan(pos + p.T, p.splits);
  if (s >= plan.active) return;
  const int64_t lo = s * plan.chunk;
  const int64_t hi = min(lo + plan.chunk, pos + p.T);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  // Query vectors of kv head g: qv = t * group + j is head g * group + j of row t.
  for (int i = tid; i < QV * hd4; i += kDecodeThreads) {
    const int qv = i / hd4, c = i % hd4;
    const int t = qv / p.group, h = g * p.group + qv % p.group;
    sm.q[i] = reinterpret_cast<const float4*>(p.q + (static_cast<int64_t>(t) * p.nh + h) * hd)[c];
  }
  for (int i = tid; i < QV; i += kDecodeThreads) {
    sm.m[i] = -INFINITY;
    sm.l[i] = 0.0f;
  }
  if (tid < p.T) sm.n_sel[tid] = p.ratio > 0 ? p.n_sel[tid] : -1;
  __syncthreads();

  // This thread's share of the 16-byte copies of tile rows list[base ..] of K (into k_s's padded
  // rows) or V, one commit group; rows past the list's end are zero-filled (p = 0 must not meet
  // NaN). Every thread commits, so the groups stay in step across the CTA.
  static_assert(kTile * 32 * NC % kDecodeThreads == 0);
  const auto issue_tile = [&](const float* src, float4* dst, int dst_stride4, int base, int n_list) {
#pragma unroll 1
    for (int r = 0; r < kTile * D::kHd4 / kDecodeThreads; ++r) {
      const int i = tid + r * kDecodeThreads, j = i / D::kHd4, c = i % D::kHd4;
      const bool real = base + j < n_list;
      const int64_t row = real ? (static_cast<int64_t>(sm.list[base + j]) * p.nkv + g) * D::kHd4 : 0;
      cp_async16(dst + j * dst_stride4 + c, reinterpret_cast<const float4*>(src) + row + c, real ? 16 : 0);
    }
    cp_async_commit();
  };

  float4 acc[D::kPasses];
#pragma unroll
  for (int k = 0; k < D::kPasses; ++k) acc[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  for (int64_t cursor = lo; cursor < hi;) {
    // List the next visible positions (ascending) while a full scan still fits.
    int list_n = 0;
    while (cursor < hi && list_n <= kListCap - kDecodeThreads) {
      const int64_t tok = cursor + tid;
      unsigned mask = 0;
      if (tok < hi) {
        for (int t = 0; t < p.T; ++t) {
          const uint32_t* row = p.bitmap + t * p.words;
          const bool sees = attn_detail::row_sees(tok, pos, t, p.ratio, sm.n_sel[t],
                                                  [row](int64_t b) { return ((row[b / 32] >> (b % 32)) & 1u) != 0; });
          mask |= static_cast<unsigned>(sees) << t;
        }
      }
      int total = 0;
      const int at = list_n + block_exclusive_scan(mask != 0 ? 1 : 0, sm.warp_tot, total);
      if (mask != 0) {
        sm.list[at] = static_cast<int32_t>(tok);
        sm.masks[at] = static_cast<uint8_t>(mask);
      }
      list_n += total;
      cursor += kDecodeThreads;
    }
    __syncthreads();

    // K and V tiles arrive by cp.async, one commit group per tile and tensor, in the order K of
    // tile 0, V of tile 0, K of tile 1, V of tile 1, ...: a tile's K copies are issued once every
    // warp has read the previous K tile (they run under the previous tile's values phase), its V
    // copies once every warp has used the previous V tile (they run under this tile's scores).
    if (list_n > 0) {
      issue_tile(p.k, sm.k, ks4, 0, list_n);
      issue_tile(p.v, sm.v, hd4, 0, list_n);
    }
    for (int base = 0; base < list_n; base += kTile) {
      const int n_tile = min(kTile, list_n - base);
      const bool more = base + kTile < list_n;
      cp_async_wait<1>();  // this tile's K (its V may still be in flight)
      __syncthreads();

      // Scores. The lane's K slice is read once and serves every query vector.
      float4 kk[D::kD4];
#pragma unroll
      for (int u = 0; u < D::kD4; ++u) kk[u] = sm.k[lane * ks4 + warp * D::kD4 + u];
      const unsigned tok_mask = lane < n_tile ? sm.masks[base + lane] : 0u;
      for (int q0 = 0; q0 < QV; q0 += kScoreChunk) {
        const int qn = min(kScoreChunk, QV - q0);
        score_partials<NC>(sm, kk, q0, qn, warp, lane);
        __syncthreads();  // the chunk's partial dots
        if (warp < qn) softmax_step(sm, q0 + warp, warp, (q0 + warp) / p.group, tok_mask, p.scale, lane);
        if (q0 + kScoreChunk < QV) __syncthreads();  // the next chunk overwrites part (same branch in every thread)
      }

      cp_async_wait<0>();  // this tile's V
      __syncthreads();     // V, weights and alpha visible; every warp is done with k_s and part
      if (more) issue_tile(p.k, sm.k, ks4, base + kTile, list_n);
      accumulate_values<NC>(sm, acc, QV, n_tile, warp, lane);
      __syncthreads();  // every warp is done with v_s, p and alpha; the next list overwrites list and masks
      if (more) issue_tile(p.v, sm.v, hd4, base + kTile, list_n);
    }
  }

  // Partial results. m and l were last written before a barrier (the tile's last one, or the
  // one after their initialisation when the split saw no token).
  const int c4 = warp * D::kD4 + lane % D::kD4;
#pragma unroll
  for (int k = 0; k < D::kPasses; ++k) {
    const int qv = lane / D::kD4 + D::kQvPerPass * k;
    if (qv >= QV) break;
    const int t = qv / p.group, h = g * p.group + qv % p.group;
    const int64_t r = (static_cast<int64_t>(s) * p.T + t) * p.nh + h;
    reinterpret_cast<float4*>(p.part_o + r * hd)[c4] = acc[k];
  }
  for (int qv = tid; qv < QV; qv += kDecodeThreads) {
    const int t = qv / p.group, h = g * p.group + qv % p.group;
    const int64_t r = (static_cast<int64_t>(s) * p.T + t) * p.nh + h;
    p.part_m[r] = sm.m[qv];
    p.part_l[r] = sm.l[qv];
  }
}

// One CTA per (row, head, 128-dim slice): merges the active splits' partial softmax sums and
// applies the sigmoid gate from qg (row t at qg + t * qg_stride). Lane i of every warp owns 4
// consecutive dims (the layout of quantize_q8_1_quad, 8 lanes per 32-value block), so with o_q8
// warp 0 also writes the slice's q8_1 blocks from the values just stored (quantize_q8_1's bytes).
//
// The merge is a chain of dependent round trips to L2 when one warp walks the splits (65 at a 4K
// context), so warp w takes a contiguous range of them: it requests its partial vectors first,
// before the max over all splits is known (they do not depend on it), then scales and sums them in
// split order; the warps' sums are then added in warp order, as are their sums of the weighted
// softmax denominators. A fixed order throughout, so the result is deterministic.
constexpr int kCombineWarps = 8;
constexpr int kCombineThreads = 32 * kCombineWarps;
constexpr int kCombineDims = 4 * 32;  // dims per CTA; hd (128 or 256) is a multiple
constexpr int kCombineBatch = 16;     // partial vectors in flight per lane (a warp's whole range up to 128 splits)

__global__ void __launch_bounds__(kCombineThreads) attn_combine_kernel(DecodeKernelArgs p, const float* __restrict__ qg,
                                                                       int64_t qg_stride, float* __restrict__ o,
                                                                       uint8_t* __restrict__ o_q8,
                                                                       int64_t o_q8_stride) {
  __shared__ float weight[kMaxSplits];
  __shared__ float part_l[kMaxSplits];
  __shared__ float warp_mx[kCombineWarps];
  __shared__ float warp_l[kCombineWarps];
  __shared__ float4 warp_acc[kCombineWarps][32];
  pdl_launch_dependents();
  pdl_wait();
  const int t = blockIdx.x / p.nh, h = blockIdx.x % p.nh;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int a0 = blockIdx.y * kCombineDims + 4 * lane;
  const int64_t pos = *p.pos;
  const int active = attn_detail::split_plan(pos + p.T, p.splits).active;
  const int64_t stride = static_cast<int64_t>(p.T) * p.nh;
  const int64_t r0 = static_cast<int64_t>(t) * p.nh + h;
  // This warp's splits [s_begin, s_end).
  const int per = (active + kCombineWarps - 1) / kCombineWarps;
  const int s_begin = min(warp * per, active), s_end = min(s_begin + per, active);
  float4 part[kCombineBatch];
#pragma unroll
  for (int j = 0; j < kCombineBatch; ++j)
    if (s_begin + j < s_end) part[j] = *reinterpret_cast<const float4*>(p.part_o + ((s_begin + j) * stride + r0) * p.hd + a0);
  // Each split's max and sum by the thread of its index: fmaxf is exact and order-free (a zero's
  // sign cannot change expf(ms - mx)), so the max is reduced in parallel.
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < active; s += kCombineThreads) {
    const float ms = p.part_m[s * stride + r0];
    weight[s] = ms;
    part_l[s] = p.part_l[s * stride + r0];
    mx = fmaxf(mx, ms);
  }
  mx = warp_max(mx);
  if (lane == 0) warp_mx[warp] = mx;
  __syncthreads();
  mx = warp_mx[0];
#pragma unroll
  for (int w = 1; w < kCombineWarps; ++w) mx = fmaxf(mx, warp_mx[w]);
  for (int s = threadIdx.x; s < active; s += kCombineThreads) {
    const float ms = weight[s];  // this thread's own store
    weight[s] = ms == -INFINITY ? 0.0f : expf(ms - mx);
  }
  __syncthreads();
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float lsum = 0.0f;  // lane 0: this warp's sum of weight * l in split order
  for (int s0 = s_begin; s0 < s_end; s0 += kCombineBatch) {
    if (s0 != s_begin) {  // ranges beyond one batch (more than kCombineWarps * kCombineBatch splits)
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j)
        if (s0 + j < s_end) part[j] = *reinterpret_cast<const float4*>(p.part_o + ((s0 + j) * stride + r0) * p.hd + a0);
    }
#pragma unroll
    for (int j = 0; j < kCombineBatch; ++j) {
      if (s0 + j >= s_end) break;
      const float w = weight[s0 + j];
      acc[0] += w * part[j].x;
      acc[1] += w * part[j].y;
      acc[2] += w * part[j].z;
      acc[3] += w * part[j].w;
      lsum += w * part_l[s0 + j];
    }
  }
  warp_acc[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  if (lane == 0) warp_l[warp] = lsum;
  __syncthreads();
  if (warp != 0) return;
  float4 v4 = warp_acc[0][lane];
  float l = warp_l[0];
#pragma unroll
  for (int w = 1; w < kCombineWarps; ++w) {
    const float4 a = warp_acc[w][lane];
    v4 = make_float4(v4.x + a.x, v4.y + a.y, v4.z + a.z, v4.w + a.w);
    l += warp_l[w];
  }
  const float inv_l = 1.0f / l;
  const float* gate = qg + t * qg_stride + static_cast<int64_t>(h) * 2 * p.hd + p.hd;
  const float accs[4] = {v4.x, v4.y, v4.z, v4.w};
  float v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float sig = 1.0f / (1.0f + expf(-gate[a0 + e]));  // scalar loads: qg_stride need not keep float4 alignment
    v[e] = (accs[e] * inv_l) * sig;
    o[r0 * p.hd + a0 + e] = v[e];
  }
  if (o_q8) {
    const int64_t col = static_cast<int64_t>(h) * p.hd + a0;  // column in the row of nh * hd
    quantize_q8_1_quad(make_float4(v[0], v[1], v[2], v[3]), true, o_q8 + t * o_q8_stride, col / 32,
                       (a0 / 4) & 7);
  }
}

Status check_dims(const AttnDims& d, int T, const char* op) {
  const std::string pre = std::string(op) + ": ";
  if (T < 1 || T > kMaxWindowRows) return Status::error(pre + "T must be 1.." + std::to_string(kMaxWindowRows));
  if (d.n_head <= 0 || d.n_head_kv <= 0 || d.n_head % d.n_head_kv != 0)
    return Status::error(pre + "n_head must be a positive multiple of n_head_kv");
  if (d.n_head / d.n_head_kv > kMaxGroup)
    return Status::error(pre + "n_head / n_head_kv must be <= " + std::to_string(kMaxGroup));
  if (d.head_dim != 128 && d.head_dim != 256) return Status::error(pre + "head_dim must be 128 or 256");
  if (d.n_rot <= 0 || d.n_rot % 2 != 0 || d.n_rot > 2 * kMaxRotHalf || d.n_rot > d.head_dim)
    return Status::error(pre + "n_rot must be even, <= 128 and <= head_dim");
  if (d.max_ctx <= 0) return Status::error(pre + "max_ctx must be positive");
  if (d.ratio < 0) return Status::error(pre + "ratio must be >= 0");
  if (d.ratio > 0) {
    if (d.idx_heads <= 0 || d.idx_head_dim <= 0 || d.idx_head_dim > kMaxVector || d.n_rot > d.idx_head_dim)
      return Status::error(pre + "idx_heads must be positive and n_rot <= idx_head_dim <= 512");
    if (d.top_blocks <= 0) return Status::error(pre + "top_blocks must be positive");
    if (d.max_ctx % d.ratio != 0) return Status::error(pre + "max_ctx must be a multiple of ratio");
    if (d.max_ctx / d.ratio > INT32_MAX) return Status::error(pre + "max_ctx / ratio must fit int32");
  }
  return Status::ok_status();
}

}  // namespace

int attn_decode_splits(const AttnDims& d) {
  if (switches().attn_splits > 0) return switches().attn_splits;  // STRATA_ATTN_SPLITS=N
  return d.n_head_kv > 0 ? std::max(1, kDefaultSplitsTotal / d.n_head_kv) : 1;
}

Status attn_prep(const AttnDims& d, const AttnPrepArgs& a, const int64_t* pos, int T, const AttnCacheView& cache,
                 Stream stream) {
  STRATA_TRY(check_dims(d, T, "attn_prep"));
  if (!a.qg || !a.k || !a.v || !a.q_norm || !a.k_norm || !a.q_out) return Status::error("attn_prep: qg, k, v, q_norm, k_norm and q_out are required");
  if (!pos) return Status::error("attn_prep: pos is null");
  if (!cache.k || !cache.v) return Status::error("attn_prep: cache.k and cache.v are required");
  if (d.ratio > 0 && (!a.iq || !a.ik || !a.iq_norm || !a.ik_norm || !a.qi_out || !cache.index_k || !cache.block_k))
    return Status::error("attn_prep: iq, ik, iq_norm, ik_norm, qi_out, cache.index_k and cache.block_k are required when ratio > 0");
  const int64_t nq = static_cast<int64_t>(d.n_head) * 2 * d.head_dim, nkv = static_cast<int64_t>(d.n_head_kv) * d.head_dim;
  const int64_t niq = static_cast<int64_t>(d.idx_heads) * d.idx_head_dim;
  const auto resolve = [](int64_t stride, int64_t row) { return stride == 0 ? row : stride; };
  const PrepKernelArgs p{a,    cache, pos, T, d.n_head, d.n_head_kv, d.head_dim, d.ratio > 0 ? d.idx_heads : 0,
                         d.idx_head_dim, d.ratio, d.max_ctx, d.eps, resolve(a.qg_stride, nq),
                         resolve(a.kv_stride, nkv), resolve(a.iq_stride, niq), resolve(a.ik_stride, d.idx_head_dim)};
  if (p.qg_stride < nq || p.kv_stride < nkv || (d.ratio > 0 && (p.iq_stride < niq || p.ik_stride < d.idx_head_dim)))
    return Status::error("attn_prep: a row stride is shorter than its rows (qg " + std::to_string(p.qg_stride) +
                         ", k/v " + std::to_string(p.kv_stride) + ", iq " + std::to_string(p.iq_stride) + ", ik " +
                         std::to_string(p.ik_stride) + ")");
  const RopeFreqs rf = rope_freqs(d.n_rot, d.rope_theta);
  const int ctas = T * (d.n_head + d.n_head_kv) + (d.ratio > 0 ? T * (d.idx_heads + 1) : 0);
  STRATA_CUDA_TRY(launch_kernel(attn_prep_kernel, dim3(ctas), dim3(kPrepThreads), 0, stream, p, rf));
  return Status::ok_status();
}

int64_t attn_decode_scratch_bytes(const AttnDims& d, int T) { return scratch_layout(d, T).total; }

Status attn_decode(const AttnDims& d, const float* q, const float* qg, const int64_t* pos, int T,
                   const AttnCacheView& cache, const int32_t* sel, const int32_t* n_sel, void* scratch, float* o,
                   Stream stream, int64_t qg_stride, void* o_q8, int64_t o_q8_stride) {
  STRATA_TRY(check_dims(d, T, "attn_decode"));
  if (const Status st = check_switches(); !st.ok()) return Status::error("attn_decode: " + st.message());
  if (!q || !qg || !pos || !o || !scratch) return Status::error("attn_decode: q, qg, pos, o and scratch are required");
  if (!cache.k || !cache.v) return Status::error("attn_decode: cache.k and cache.v are required");
  if (d.ratio > 0 && (!sel || !n_sel)) return Status::error("attn_decode: sel and n_sel are required when ratio > 0");
  const int64_t nq = static_cast<int64_t>(d.n_head) * 2 * d.head_dim;
  if (qg_stride == 0) qg_stride = nq;
  if (qg_stride < nq)
    return Status::error("attn_decode: qg_stride " + std::to_string(qg_stride) + " is shorter than a row of qg (" +
                         std::to_string(nq) + ")");
  const int64_t o_cols = static_cast<int64_t>(d.n_head) * d.head_dim;
  if (o_q8 && (reinterpret_cast<uintptr_t>(o_q8) % 16 != 0 || o_q8_stride % 16 != 0 || o_q8_stride < o_cols / 32 * 36))
    return Status::error("attn_decode: o_q8 must be 16-byte aligned with a stride that is a multiple of 16 bytes >= " +
                         std::to_string(o_cols / 32 * 36) + " (stride " + std::to_string(o_q8_stride) + ")");
  const ScratchLayout lay = scratch_layout(d, T);
  char* base = static_cast<char*>(scratch);
  DecodeKernelArgs p{};
  p.q = q;
  p.pos = pos;
  p.k = cache.k;
  p.v = cache.v;
  p.n_sel = n_sel;
  p.bitmap = reinterpret_cast<const uint32_t*>(base + lay.bitmap);
  p.words = d.ratio > 0 ? (d.max_ctx / d.ratio + 31) / 32 : 0;
  p.part_o = reinterpret_cast<float*>(base + lay.part_o);
  p.part_m = reinterpret_cast<float*>(base + lay.part_m);
  p.part_l = reinterpret_cast<float*>(base + lay.part_l);
  p.T = T;
  p.nh = d.n_head;
  p.nkv = d.n_head_kv;
  p.hd = d.head_dim;
  p.group = d.n_head / d.n_head_kv;
  p.ratio = d.ratio;
  p.splits = attn_decode_splits(d);
  // src/reference/attention.cpp: float(1 / sqrt(double(hd))).
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim)));

  if (d.ratio > 0) {
    STRATA_CUDA_TRY(launch_kernel(chosen_bitmap_kernel, dim3(T), dim3(256), 0, stream, sel, d.top_blocks, n_sel,
                                  reinterpret_cast<uint32_t*>(base + lay.bitmap), p.words));
  }
  const size_t smem = decode_smem_bytes(T, p.group, d.head_dim);
  const dim3 grid(static_cast<unsigned>(p.splits), static_cast<unsigned>(d.n_head_kv));
  if (d.head_dim == 256) {
    STRATA_CUDA_TRY(cudaFuncSetAttribute(attn_split_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    STRATA_CUDA_TRY(launch_kernel(attn_split_kernel<2>, grid, dim3(kDecodeThreads), smem, stream, p));
  } else {
    STRATA_CUDA_TRY(cudaFuncSetAttribute(attn_split_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    STRATA_CUDA_TRY(launch_kernel(attn_split_kernel<1>, grid, dim3(kDecodeThreads), smem, stream, p));
  }
  STRATA_CUDA_TRY(launch_kernel(attn_combine_kernel, dim3(T * d.n_head, d.head_dim / kCombineDims),
                                dim3(kCombineThreads), 0, stream, p, qg, qg_stride, o, static_cast<uint8_t*>(o_q8),
                                o_q8_stride));
  return Status::ok_status();
}

}  // namespace strata::cuda
