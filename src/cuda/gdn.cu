// Gated DeltaNet decode kernels (src/cuda/gdn.h), following src/reference/gdn.cpp and
// reference::causal_conv_silu / l2_norm / rms_norm_gated operation by operation in fp32 (the
// reference sums in double; the kernels sum in a fixed fp32 order, so results are deterministic).
//
//   gdn_conv_kernel        one thread per channel: a sliding window of K values in registers
//   gdn_conv_commit_kernel every GDN layer's history move in one launch, one thread per channel:
//                          K - 1 rows through registers (safe in place)
//   gdn_recurrent_kernel   one CTA per (value head, 32 value columns); the CTA's slice of the
//                          state lives in registers for the whole window (read and written once);
//                          its kConv form runs the conv of the channels the CTA reads first, and
//                          its kNorm form also the gated norm that follows it in the decoder's
//                          GDN step, the head's D / 32 column CTAs as one cluster; the
//                          conv form can also project its head's b and a itself
//   gdn_gated_norm_kernel  one warp per (row, value head)
//
// The fused norm gives the bits of the gdn_gated_norm launch it replaces, by running the same
// operations in the same order (the parity cases compare them bit for bit): gdn_gated_norm_kernel's
// lane l sums o^2 over columns l, l + 32, l + 64, ... in order, and those are lane l's columns of
// the head's CTAs in rank order, read through distributed shared memory; the scale and the output
// use the same helpers (gated_norm_scale / gated_norm_value), and the q8_1 block of a CTA's 32
// columns the same lane layout.
#include "gdn.h"

#include <string>

#include "common.cuh"
#include "float_weights.cuh"
#include "launch.cuh"
#include "q8_1.cuh"

namespace strata::cuda {
namespace {

constexpr int kConvThreads = 128;

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }  // torch's CPU form
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }  // beta 1, threshold 20

// The gated norm's two formulas (reference::rms_norm_gated), shared by gdn_gated_norm_kernel and
// the recurrent kernel's fused norm so that both round alike: r = 1 / sqrt(ss / D + eps) and
// y = (w * (x * r)) * sigmoid(z). Spelled with _rn intrinsics: the IEEE operations the plain
// operators compile to (1.0f / x is rcp.rn), but never contracted or rewritten, where D is a
// constant in one caller only.
__device__ __forceinline__ float gated_norm_scale(float ss, int D, float eps) {
  return __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(D)), eps)));
}
__device__ __forceinline__ float gated_norm_value(float w, float x, float r, float z) {
  return __fmul_rn(__fmul_rn(w, __fmul_rn(x, r)), sigmoid(z));  // reference order
}

// ---- gdn_conv ------------------------------------------------------------------------------------

// Where one channel's conv inputs are read: history row j at hist[j * hist_stride], new row t at
// m[t * m_stride] (both already at the channel). Global memory for gdn_conv_kernel; the fused
// kernel's shared-memory copies (conv_in) for gdn_recurrent_kernel.
struct ConvInputs {
  const float* hist;
  int64_t hist_stride;
  const float* m;
  int64_t m_stride;
};

// One channel's conv over the window, shared by gdn_conv_kernel and the fused conv + recurrent
// kernel so that both compute the same bits. The T new inputs load first (independent loads, one
// memory latency instead of T), then the walk: win[] holds the K inputs of output row t (oldest
// first), taken from the K - 1 history rows and then the new rows. Output row t goes to
// y[t * y_stride] when y is set; a channel's single writer (`write`) also appends the new rows to
// hist and stores c. Old history rows are only read and new rows only written, so no thread reads
// what another writes. The inputs and hist are not __restrict__: a caller may project straight
// into hist rows K - 1 ...
__device__ __forceinline__ void conv_channel(const ConvInputs& in, const float (&w)[kGdnMaxConvKernel], float* hist,
                                             int conv_dim, int K, int T, int ch, bool write,
                                             float* __restrict__ c, float* y, int y_stride) {
  float win[kGdnMaxConvKernel], xs[kMaxWindowRows];
#pragma unroll
  for (int j = 0; j < kGdnMaxConvKernel; ++j) win[j] = j < K - 1 ? in.hist[j * in.hist_stride] : 0.0f;
#pragma unroll
  for (int t = 0; t < kMaxWindowRows; ++t) xs[t] = t < T ? in.m[t * in.m_stride] : 0.0f;
#pragma unroll
  for (int t = 0; t < kMaxWindowRows; ++t) {
    if (t >= T) break;
    const float x = xs[t];
    if (write) hist[static_cast<int64_t>(K - 1 + t) * conv_dim + ch] = x;
    // win[K - 1] = the newest row; taps in the reference's order j = 0 .. K - 1.
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kGdnMaxConvKernel; ++j) {
      if (j < K) acc = fmaf(w[j], j == K - 1 ? x : win[j], acc);
    }
    const float out = silu(acc);
    if (write) c[static_cast<int64_t>(t) * conv_dim + ch] = out;
    if (y) y[t * y_stride] = out;
    // Slide: drop the oldest input, append x. Every slot is assigned a select (no branch), so
    // no form of the kernel turns `win[K - 2] = x` into a dynamically indexed (local memory) store.
#pragma unroll
    for (int j = 0; j + 1 < kGdnMaxConvKernel; ++j) win[j] = j < K - 2 ? win[j + 1] : j == K - 2 ? x : win[j];
  }
}

__device__ __forceinline__ void load_taps(const float* __restrict__ conv_w, int64_t ch, int K,
                                          float (&w)[kGdnMaxConvKernel]) {
#pragma unroll
  for (int j = 0; j < kGdnMaxConvKernel; ++j) w[j] = j < K ? conv_w[ch * K + j] : 0.0f;
}

// Thread per channel.
__global__ void __launch_bounds__(kConvThreads) gdn_conv_kernel(const float* m, int64_t m_stride,
                                                                const float* __restrict__ conv_w, float* hist,
                                                                int conv_dim, int K, int T, float* __restrict__ c) {
  pdl_launch_dependents();
  const int ch = blockIdx.x * kConvThreads + threadIdx.x;
  const bool live = ch < conv_dim;
  float w[kGdnMaxConvKernel];
  if (live) load_taps(conv_w, ch, K, w);  // pdl-pre-wait: weights
  // The taps are weights; the history and m are written by earlier kernels. Every thread waits,
  // the ones past conv_dim too, before it leaves (launch.cuh: no thread exits ahead of the wait).
  pdl_wait();
  if (!live) return;
  const ConvInputs in{hist + ch, conv_dim, m + ch, m_stride};
  conv_channel(in, w, hist, conv_dim, K, T, ch, /*write=*/true, c, nullptr, 0);
}

// Every GDN layer's conv-history move of a commit (gdn.h: gdn_conv_commit) in one launch: block
// row y is layer y, one thread per channel, the K - 1 kept rows through registers (every read
// before any write, so in place). One launch, not one per layer: at the release's 36 GDN layers
// the commit was 36 launches of about 1.3 us each (H100, CUPTI), latency alone.
__global__ void __launch_bounds__(kConvThreads) gdn_conv_commit_kernel(float* const* __restrict__ hists, int conv_dim,
                                                                       int K, int n) {
  pdl_launch_dependents();
  pdl_wait();  // before any thread leaves (launch.cuh); the table is read after it too
  const int ch = blockIdx.x * kConvThreads + threadIdx.x;
  if (ch >= conv_dim) return;
  float* hist = hists[blockIdx.y];
  float keep[kGdnMaxConvKernel - 1];
#pragma unroll
  for (int j = 0; j < kGdnMaxConvKernel - 1; ++j) {
    if (j < K - 1) keep[j] = hist[static_cast<int64_t>(n + j) * conv_dim + ch];
  }
#pragma unroll
  for (int j = 0; j < kGdnMaxConvKernel - 1; ++j) {
    if (j < K - 1) hist[static_cast<int64_t>(j) * conv_dim + ch] = keep[j];
  }
}

// ---- gdn_recurrent -------------------------------------------------------------------------------

constexpr int kRecWarps = 8;
constexpr int kRecThreads = kRecWarps * 32;
constexpr int kRecCols = 32;  // value columns per CTA: one per lane

// The CTAs per SM each form of gdn_recurrent_kernel is held to (its __launch_bounds__ minimum)
// on sm_80 .. sm_90: the occupancy each had there before its operands were copied early, the
// register budget 65536 / (kRecThreads * n), 8-aligned, being 40 for 6, 64 for 4 and 80 for 3.
// Without the bound ptxas may spend registers on scheduling freedom and lose a CTA per SM. Turing
// and sm_120 keep no minimum (0, the attribute's default): a Turing SM holds 1024 threads, and
// ptxas spills on sm_120 at these budgets.
constexpr int rec_min_ctas_per_sm(int D, bool conv, bool norm) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && __CUDA_ARCH__ < 1000
  return !conv ? 6 : D == 128 || (D == 64 && norm) ? 3 : 4;
#else
  (void)D, (void)conv, (void)norm;
  return 0;
#endif
}

// kNorm: rows t = 4 * warp + lane / 8 of the output pass, eight lanes (one q8_1 block) per row.
constexpr int kNormRowsPerWarp = 4;
static_assert(kMaxWindowRows <= kRecWarps, "the fused norm's row sums take one warp per row");
static_assert(kMaxWindowRows % kNormRowsPerWarp == 0, "the fused norm's output pass takes whole warps");

struct RecArgs {
  const float* c;
  const float* b;
  const float* a;
  int64_t ba_stride;
  const float* ssm_a;
  const float* dt_bias;
  const float* state_in;
  float* state_out;
  float* out;
  float* b_keep;  // optional: b and a rows copied at stride n_v_heads (by the CTAs of column 0)
  float* a_keep;
  // kConv: the gate projection (GdnGateProjection) when proj_w is set; b and a are then unused.
  const void* proj_w;
  quant::Type proj_type;
  int proj_k;
  const float* u;
  int64_t u_stride;
  int n_k_heads, n_v_heads, conv_dim, T;
  // The fused conv (kConv): m rows at m + t * m_stride, the taps, the history; c_out (= c) written.
  float* c_out;
  const float* m;
  int64_t m_stride;
  const float* conv_w;
  float* hist;
  int K;
  // kNorm: gdn_gated_norm's z, w, eps, y and y_q8.
  const float* z;
  int64_t z_stride;
  const float* norm_w;
  float eps;
  float* y;
  uint8_t* y_q8;
  int64_t q8_stride;
};

// ---- operands copied early ------------------------------------------------------------------------

// One float global -> shared without passing through registers (cp.async, sm_80+; a synchronous
// copy before), for an operand copied at the start of the kernel and read much later: its
// latency overlaps the work in between, and no register holds it meanwhile. The copying thread
// reads the value after cp_async_commit() and cp_async_wait (common.cuh); others after a barrier too.
__device__ __forceinline__ void cp_async4(float* smem_dst, const float* gmem_src) {
#if __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(gmem_src) : "memory");
#else
  *smem_dst = *gmem_src;
#endif
}

// The operands of row t's gates (beta = sigmoid(b), decay = exp(A * softplus(a + dt_bias))),
// copied by thread t < T, the thread that computes them: b and a (activations) after pdl_wait, A
// and dt_bias of the head (weights) before it, one copy per row so that each thread reads only
// its own copies.
struct GateOperands {
  float b[kMaxWindowRows], a[kMaxWindowRows], ssm_a[kMaxWindowRows], dt_bias[kMaxWindowRows];
};

// ---- kNorm: the gated norm in the recurrent kernel ------------------------------------------------

// The operands of the epilogue's output pass that no computation of the kernel produces, this
// CTA's 32 columns: z of the window's rows (activations, copied after pdl_wait) and the norm
// weights (before it). Read by other threads than the copying ones, after the epilogue's barrier.
struct NormOperands {
  float z[kMaxWindowRows][kRecCols];
  float w[kRecCols];
};
static_assert(kMaxWindowRows * kRecCols <= kRecThreads, "one z copy per thread");

// Warp 0, lane l: the weight of column col0 + l (row 0 is always live, so every one is read).
__device__ __forceinline__ void copy_norm_weights(const RecArgs& p, int col0, NormOperands& ops) {
  if (threadIdx.x < kRecCols) cp_async4(&ops.w[threadIdx.x], p.norm_w + col0 + threadIdx.x);
}

// Thread i < T * 32: z of row i / 32, column col0 + i % 32 of head h.
template <int D>
__device__ __forceinline__ void copy_norm_z(const RecArgs& p, int h, int col0, NormOperands& ops) {
  const int i = static_cast<int>(threadIdx.x), t = i / kRecCols, l = i % kRecCols;
  if (t < p.T) cp_async4(&ops.z[t][l], p.z + t * p.z_stride + static_cast<int64_t>(h) * D + col0 + l);
}

// gdn_gated_norm_kernel's y (and y_q8) for this CTA's 32 columns of head h, bit for bit. That
// kernel's lane l sums fmaf(o_i, o_i) over i = l, l + 32, l + 64, ... in order, then the warp
// butterfly; o_{l + 32c} is lane l's column of the head's CTA c (cluster rank c = blockIdx.x).
// Every CTA pushes its o rows into every other CTA's o_all[c] by st.async, counted on that CTA's
// o_bar (common.cuh's cluster_push; armed at the kernel's start, before its phase-1 arrive), so
// warp t then reads row t of every rank from its own shared memory in rank order and sums alike:
// no cluster barrier with release semantics, and no CTA stays resident for the others' reads.
// Then warps 0 and 1 write the CTA's columns of four rows each, eight lanes per row with four
// consecutive values, from the operands copied early (ops): the CTA's 32 columns are one q8_1
// block, in gdn_gated_norm_kernel's lane layout.
template <int D>
__device__ __forceinline__ void gated_norm_epilogue(const RecArgs& p, int h, int col0,
                                                    float (&o_all)[D / kRecCols][kMaxWindowRows][kRecCols],
                                                    uint64_t& o_bar, float (&inv)[kMaxWindowRows],
                                                    const NormOperands& ops) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // thread-block clusters need sm_90; gdn_fused_norm_supported() keeps older devices off this path
#else
  constexpr int kRanks = D / kRecCols;
  const int rank = static_cast<int>(blockIdx.x);
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  cp_async_wait<0>();      // this thread's copies of ops have landed; the barrier below shows them to all
  __syncthreads();         // warp 0's o rows in o_all[rank], and ops
  cluster_wait_acquire();  // phase 1: every CTA of the head has started and armed its o_bar
  if (warp < p.T) {
    const float x = o_all[rank][warp][lane];
#pragma unroll
    for (int c = 0; c < kRanks; ++c)
      if (c != rank) cluster_push(cluster_rank_addr(&o_all[rank][warp][lane], c), x, cluster_rank_addr(&o_bar, c));
  }
  cluster_push_wait(&o_bar);  // the other ranks' rows are in
  if (warp < p.T) {
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < kRanks; ++c) {
      const float x = o_all[c][warp][lane];
      ss = fmaf(x, x, ss);
    }
    ss = warp_sum(ss);
    if (lane == 0) inv[warp] = gated_norm_scale(ss, D, p.eps);
  }
  __syncthreads();  // inv
  if (warp < kMaxWindowRows / kNormRowsPerWarp) {
    const int t = warp * kNormRowsPerWarp + (lane >> 3), part = lane & 7;
    const bool live = t < p.T;
    const int j0 = 4 * part;                                          // first of the lane's columns in the CTA
    const int64_t col = static_cast<int64_t>(h) * D + col0 + j0;     // ... in the row of n_v_heads * D
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (live) {
      const int64_t row = static_cast<int64_t>(t) * p.n_v_heads * D;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[e] = gated_norm_value(ops.w[j0 + e], o_all[rank][t][j0 + e], inv[t], ops.z[t][j0 + e]);
        p.y[row + col + e] = v[e];
      }
    }
    if (p.y_q8)  // uniform: every lane of the warp reaches the quantizer's shuffles
      quantize_q8_1_quad(make_float4(v[0], v[1], v[2], v[3]), live, p.y_q8 + t * p.q8_stride, col / 32, part);
  }
#endif
}

// ---- the gate projection -------------------------------------------------------------------------

// In the decoder's step the beta|alpha mat-vec was a launch of its own between the qkv projection
// and this kernel (2 * n_v_heads rows, 0.5 MB of BF16 at the released geometry), on the critical
// path of every GDN layer. Here every CTA of head h computes the head's two dots itself, from
// the weights (two rows, pulled toward L2 before the PDL wait) and the window's u rows. H100,
// iq3_xxs 48 layers: 4.839 -> 4.817 ms a token at T = 1, 8.151 -> 8.120 ms a T = 4 window
// (bench/results/2026-12-06-h100-gdn-gates).
//
// part[w][t] and part[w][kMaxWindowRows + t]: warp w's sums of row t's b and a (its lanes'
// strided 16-byte weight vectors in order, then the butterfly); the gate thread adds the warps
// in order.
template <quant::Type WT>
__device__ __forceinline__ void project_gates(const RecArgs& p, int h, float (&part)[kRecWarps][2 * kMaxWindowRows]) {
  constexpr int kPer = kWeightsPerVec<WT>;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int nvec = p.proj_k / kPer;
  const int64_t row_vecs = nvec;  // 16-byte vectors per row
  const uint4* wb = static_cast<const uint4*>(p.proj_w) + static_cast<int64_t>(h) * row_vecs;
  const uint4* wa = static_cast<const uint4*>(p.proj_w) + static_cast<int64_t>(p.n_v_heads + h) * row_vecs;
  for (int t = 0; t < p.T; ++t) {
    const float4* u4 = reinterpret_cast<const float4*>(p.u + t * p.u_stride);
    float sb = 0.0f, sa = 0.0f;
    // Two of a thread's vectors at a time, every load issued before the first is used (a 2560-wide
    // row is 320 BF16 vectors: a second one for the first 64 threads, which otherwise waited for
    // the first one's round trip before requesting it).
    constexpr int kGateBatch = 2;
    for (int v0 = static_cast<int>(threadIdx.x); v0 < nvec; v0 += kGateBatch * kRecThreads) {
      uint4 rb[kGateBatch], ra[kGateBatch];
      float4 ru[kGateBatch][kPer / 4];
#pragma unroll
      for (int k = 0; k < kGateBatch; ++k) {
        const int v = v0 + k * kRecThreads;
        if (v >= nvec) break;
        rb[k] = __ldg(wb + v);  // pdl-pre-wait: weights
        ra[k] = __ldg(wa + v);  // pdl-pre-wait: weights
#pragma unroll
        for (int q = 0; q < kPer / 4; ++q) ru[k][q] = u4[v * (kPer / 4) + q];
      }
#pragma unroll
      for (int k = 0; k < kGateBatch; ++k) {
        const int v = v0 + k * kRecThreads;
        if (v >= nvec) break;
        float fb[kPer], fa[kPer];
        weight_floats<WT>(rb[k], fb);
        weight_floats<WT>(ra[k], fa);
#pragma unroll
        for (int q = 0; q < kPer / 4; ++q) {
          const float4 x = ru[k][q];
          sb = fmaf(fb[4 * q], x.x, sb);
          sb = fmaf(fb[4 * q + 1], x.y, sb);
          sb = fmaf(fb[4 * q + 2], x.z, sb);
          sb = fmaf(fb[4 * q + 3], x.w, sb);
          sa = fmaf(fa[4 * q], x.x, sa);
          sa = fmaf(fa[4 * q + 1], x.y, sa);
          sa = fmaf(fa[4 * q + 2], x.z, sa);
          sa = fmaf(fa[4 * q + 3], x.w, sa);
        }
      }
    }
    sb = warp_sum(sb);
    sa = warp_sum(sa);
    if (lane == 0) {
      part[warp][t] = sb;
      part[warp][kMaxWindowRows + t] = sa;
    }
  }
}

__device__ __forceinline__ void project_gates_typed(const RecArgs& p, int h, float (&part)[kRecWarps][2 * kMaxWindowRows]) {
  switch (p.proj_type) {
    case quant::Type::F32: project_gates<quant::Type::F32>(p, h, part); break;
    case quant::Type::F16: project_gates<quant::Type::F16>(p, h, part); break;
    default: project_gates<quant::Type::BF16>(p, h, part); break;
  }
}

// ---- the recurrent kernel -------------------------------------------------------------------------

// The conv channel of the fused kernel's channel i: q (i < D) and k (i < 2D) of key head kh, then
// v of the CTA's 32 columns of value head h.
template <int D>
__device__ __forceinline__ int fused_conv_channel(int i, int kh, int h, int col0, int64_t key_dim) {
  return i < D       ? kh * D + i
         : i < 2 * D ? static_cast<int>(key_dim) + kh * D + (i - D)
                     : 2 * static_cast<int>(key_dim) + h * D + col0 + (i - 2 * D);
}

// Grid (D / 32, n_v_heads). Warp w owns key rows [w * R, (w + 1) * R) of the CTA's 32 columns,
// lane l column col0 + l, so M[i][j] of the slice sits in register m[i - w * R] of that lane. Each
// product M^T x is a per-warp partial over its R rows (ascending i) and then a sum of the
// kRecWarps partials in warp order, computed identically by every thread that needs it.
//
// kConv: the CTA first computes the conv outputs it needs from m and the history (q and k of its
// key head, v of its 32 columns) straight into shared memory. Each channel's conv is computed by
// several CTAs (every value head of a key head, every column block), but written to c and
// appended to hist by one: q/k channels by the CTA (column block 0, value head kh), v channels by
// their only reader. The others read only history rows 0 .. K-2, which no CTA writes.
//
// kNorm (kConv only; launched as clusters of the head's D / 32 CTAs): gated_norm_epilogue after
// the window, with this CTA's o columns kept in o_blk.
//
// p.proj_w (kConv only): b and a projected in the kernel (project_gates) before the conv.
template <int D, bool kConv, bool kNorm = false>
__global__ void __launch_bounds__(kRecThreads, rec_min_ctas_per_sm(D, kConv, kNorm))
    gdn_recurrent_kernel(const RecArgs p) {
  static_assert(D % kRecCols == 0 && D % kRecWarps == 0, "head_dim must split into lanes and warps");
  static_assert(kConv || !kNorm, "the fused norm exists in the decoder's conv form only");
  constexpr int R = D / kRecWarps;
  __shared__ float qn[kMaxWindowRows][D], kn[kMaxWindowRows][D];  // l2-normalised (q also / sqrt(D))
  __shared__ float vs[kMaxWindowRows][kRecCols];
  __shared__ float decay[kMaxWindowRows], beta[kMaxWindowRows];
  __shared__ float part_r[kRecWarps][kRecCols], part_o[kRecWarps][kRecCols];
  // kNorm: every column CTA's o rows of the head, o_all[rank][t][lane] (gated_norm_epilogue), and
  // the mbarrier counting the other ranks' pushes into it.
  __shared__ float o_all[kNorm ? D / kRecCols : 1][kMaxWindowRows][kRecCols];
  __shared__ uint64_t o_bar;
  __shared__ float inv_rms[kMaxWindowRows];          // kNorm: the head's 1 / rms per row
  __shared__ GateOperands gate_ops;                  // b, a, A, dt_bias of the rows' gates, copied early
  __shared__ NormOperands norm_ops;                  // kNorm: z and the weights, copied early
  __shared__ float gate_part[kRecWarps][2 * kMaxWindowRows];  // p.proj_w: the warps' b / a sums
  // kConv: channel i's taps, history rows 0 .. K - 2 and the window's rows (conv_in[K - 1 + t]),
  // each copied by the thread that computes channel i.
  constexpr int kConvCh = kConv ? 2 * D + kRecCols : 1;
  __shared__ float conv_taps[kConv ? kGdnMaxConvKernel : 1][kConvCh];
  __shared__ float conv_in[kConv ? kGdnMaxConvKernel - 1 + kMaxWindowRows : 1][kConvCh];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int h = blockIdx.y;
  const int col0 = blockIdx.x * kRecCols;
  const int row0 = warp * R;
  const int kh = h % p.n_k_heads;  // tiled order (reference key_head)
  const int64_t key_dim = static_cast<int64_t>(p.n_k_heads) * D;
  if constexpr (kNorm) {  // the epilogue's o_bar armed for the other ranks' rows, before phase 1
    if (threadIdx.x == 0) cluster_push_init(&o_bar, (D / kRecCols - 1) * p.T * kRecCols * sizeof(float));
    cluster_arrive_relaxed();  // phase 1 (gated_norm_epilogue waits)
  }

  // Every input that no computation of the kernel produces is requested up front, so that the
  // latencies overlap one another, the state loads and the conv instead of adding up along the
  // window: the weights before pdl_wait (no kernel writes them), the activations and the state
  // right after it. The state goes to registers; the gate and norm operands to shared memory
  // (cp_async4), for the threads that use them where they did before, with the same arithmetic.
  const bool gate_thread = static_cast<int>(threadIdx.x) < p.T;  // thread t: row t's gates
  if (gate_thread) {
    cp_async4(&gate_ops.ssm_a[threadIdx.x], p.ssm_a + h);  // pdl-pre-wait: weight
    cp_async4(&gate_ops.dt_bias[threadIdx.x], p.dt_bias + h);  // pdl-pre-wait: weight
  }
  if constexpr (kNorm) copy_norm_weights(p, col0, norm_ops);  // pdl-pre-wait: weights
  const bool projected = kConv && p.proj_w != nullptr;
  if (projected && warp < 2) {  // the head's beta and alpha rows toward L2
    const int64_t row_bytes = static_cast<int64_t>(p.proj_k) * (p.proj_type == quant::Type::F32 ? 4 : 2);
    prefetch_l2_warp(static_cast<const uint8_t*>(p.proj_w) + (warp * p.n_v_heads + h) * row_bytes, row_bytes, lane);
  }
  // The state slice, read once per window: streaming (evict-first) loads and stores keep it from
  // displacing weights in L2. Requested before pdl_wait: within a window only this launch writes
  // layer h's state (the previous window's launch, its replay or the commit copy all finish before
  // the window's first kernel starts, which waits on them in full), so no kernel it could overlap
  // writes it.
  const int64_t sbase = static_cast<int64_t>(h) * D * D + col0 + lane;
  float m[R];
#pragma unroll
  for (int r = 0; r < R; ++r) m[r] = __ldcs(p.state_in + sbase + static_cast<int64_t>(row0 + r) * D);  // pdl-pre-wait: state

  // kConv: the conv's inputs go to shared memory by cp.async, so that their round trips overlap
  // the state's and the gate projection's instead of following them (the conv computed from
  // them after project_gates). The taps and history rows 0 .. K - 2 before pdl_wait, on the same
  // grounds as the state (only this launch writes the layer's history within a window, and only
  // rows K - 1 ...); the window's rows after it. With the gate loads batched (project_gates):
  // H100, iq3_xxs 48 layers, 4.385 -> 4.327 ms a token at T = 1, 7.188 -> 7.174 ms a T = 4 window
  // (bench/results/2026-12-07-h100-gdn-conv-staged).
  if constexpr (kConv) {
    for (int i = static_cast<int>(threadIdx.x); i < kConvCh; i += kRecThreads) {
      const int64_t ch = fused_conv_channel<D>(i, kh, h, col0, key_dim);
      for (int j = 0; j < p.K; ++j) cp_async4(&conv_taps[j][i], p.conv_w + ch * p.K + j);  // pdl-pre-wait: weights
      for (int j = 0; j + 1 < p.K; ++j) cp_async4(&conv_in[j][i], p.hist + j * p.conv_dim + ch);  // pdl-pre-wait: state
    }
  }

  pdl_launch_dependents();
  pdl_wait();  // everything below reads state or activations written by earlier kernels
  if (gate_thread && !projected) {
    const int t = threadIdx.x;
    cp_async4(&gate_ops.b[t], p.b + t * p.ba_stride + h);
    cp_async4(&gate_ops.a[t], p.a + t * p.ba_stride + h);
  }
  if constexpr (kConv) {
    for (int i = static_cast<int>(threadIdx.x); i < kConvCh; i += kRecThreads) {
      const int64_t ch = fused_conv_channel<D>(i, kh, h, col0, key_dim);
      for (int t = 0; t < p.T; ++t) cp_async4(&conv_in[p.K - 1 + t][i], p.m + t * p.m_stride + ch);
    }
  }
  cp_async_commit();  // the gate group (with the norm weights)
  if constexpr (kNorm) {
    copy_norm_z<D>(p, h, col0, norm_ops);
    cp_async_commit();  // the z group, awaited in the epilogue
  }

  if constexpr (kConv) {
    if (projected) project_gates_typed(p, h, gate_part);  // read after the barrier below
    const bool owns_qk = h == kh && blockIdx.x == 0;
    cp_async_wait<kNorm ? 1 : 0>();  // the gate group, which holds this thread's conv inputs
    for (int i = static_cast<int>(threadIdx.x); i < kConvCh; i += kRecThreads) {
      const int ch = fused_conv_channel<D>(i, kh, h, col0, key_dim);
      float* y = i < D ? &qn[0][i] : i < 2 * D ? &kn[0][i - D] : &vs[0][i - 2 * D];
      const int y_stride = i < 2 * D ? D : kRecCols;
      const bool write = i < 2 * D ? owns_qk : true;
      float w[kGdnMaxConvKernel];
#pragma unroll
      for (int j = 0; j < kGdnMaxConvKernel; ++j) w[j] = j < p.K ? conv_taps[j][i] : 0.0f;
      const ConvInputs in{&conv_in[0][i], kConvCh, &conv_in[p.K - 1][i], kConvCh};
      conv_channel(in, w, p.hist, p.conv_dim, p.K, p.T, ch, write, p.c_out, y, y_stride);
    }
    __syncthreads();
  }

  // Prologue: q/k of every row normalised (one warp per vector), v of this CTA's columns, gates.
  const float sqrt_d = sqrtf(static_cast<float>(D));
  for (int vec = warp; vec < 2 * p.T; vec += kRecWarps) {
    const int t = vec >> 1;
    const bool is_q = (vec & 1) == 0;
    // kConv: the raw conv outputs are already in qn / kn; each lane reads its elements before it
    // overwrites them with the normalised values.
    const float* x = kConv ? (is_q ? qn[t] : kn[t])
                           : p.c + static_cast<int64_t>(t) * p.conv_dim + (is_q ? 0 : key_dim) + static_cast<int64_t>(kh) * D;
    float xv[D / 32];
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < D / 32; ++e) {
      xv[e] = x[e * 32 + lane];
      ss = fmaf(xv[e], xv[e], ss);
    }
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss + 1e-6f);  // reference l2_norm: eps inside the sum
#pragma unroll
    for (int e = 0; e < D / 32; ++e) {
      if (is_q) qn[t][e * 32 + lane] = (xv[e] * inv) / sqrt_d;  // normalise, then divide (reference order)
      else kn[t][e * 32 + lane] = xv[e] * inv;
    }
  }
  for (int i = static_cast<int>(threadIdx.x); !kConv && i < p.T * kRecCols; i += kRecThreads) {
    const int t = i / kRecCols, l = i % kRecCols;
    vs[t][l] = p.c[static_cast<int64_t>(t) * p.conv_dim + 2 * key_dim + static_cast<int64_t>(h) * D + col0 + l];
  }
  if (gate_thread) {
    const int t = threadIdx.x;
    cp_async_wait<kNorm ? 1 : 0>();  // the gate group (the z group may still be in flight)
    float bt = 0.0f, at = 0.0f;
    if (projected) {
#pragma unroll
      for (int w = 0; w < kRecWarps; ++w) {
        bt += gate_part[w][t];
        at += gate_part[w][kMaxWindowRows + t];
      }
    } else {
      bt = gate_ops.b[t];
      at = gate_ops.a[t];
    }
    if (p.b_keep && blockIdx.x == 0) {  // one writer per (row, head)
      p.b_keep[t * p.n_v_heads + h] = bt;
      p.a_keep[t * p.n_v_heads + h] = at;
    }
    beta[t] = sigmoid(bt);
    decay[t] = expf(gate_ops.ssm_a[t] * softplus(at + gate_ops.dt_bias[t]));  // g = A * softplus(a + dt_bias)
  }
  __syncthreads();

  for (int t = 0; t < p.T; ++t) {
    // M = exp(g) M; r = M^T k.
    const float dec = decay[t];
    float acc = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      m[r] *= dec;
      acc = fmaf(m[r], kn[t][row0 + r], acc);
    }
    part_r[warp][lane] = acc;
    __syncthreads();
    float rj = 0.0f;
#pragma unroll
    for (int w = 0; w < kRecWarps; ++w) rj += part_r[w][lane];
    // delta = (v - r) * beta; M += k (x) delta; o = M^T q with the updated M.
    const float delta = (vs[t][lane] - rj) * beta[t];
    acc = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      m[r] = fmaf(kn[t][row0 + r], delta, m[r]);
      acc = fmaf(m[r], qn[t][row0 + r], acc);
    }
    part_o[warp][lane] = acc;
    // Every read of part_r above comes before this barrier and its next write after it; warp 0
    // reads part_o before it reaches the next step's first barrier, after which part_o is written.
    __syncthreads();
    if (warp == 0) {
      float o = 0.0f;
#pragma unroll
      for (int w = 0; w < kRecWarps; ++w) o += part_o[w][lane];
      p.out[static_cast<int64_t>(t) * p.n_v_heads * D + static_cast<int64_t>(h) * D + col0 + lane] = o;
      if constexpr (kNorm) o_all[blockIdx.x][t][lane] = o;
    }
  }

  // Each element is read and written by the same thread, so state_in == state_out is safe.
#pragma unroll
  for (int r = 0; r < R; ++r) __stcs(p.state_out + sbase + static_cast<int64_t>(row0 + r) * D, m[r]);
  if constexpr (kNorm) gated_norm_epilogue<D>(p, h, col0, o_all, o_bar, inv_rms, norm_ops);
}

// ---- gdn_gated_norm ------------------------------------------------------------------------------

constexpr int kNormWarps = 4;

// Warp per (row t, head hd): sum of squares in fp32 (lane-strided, then the warp butterfly). The
// output pass gives each lane 4 consecutive values per 128, the layout of quantize_q8_1_quad, so
// the q8_1 form (y_q8, when set; head_dim a multiple of 32) comes from the values just stored:
// the same bytes quantize_q8_1 writes from y.
__global__ void __launch_bounds__(kNormWarps * 32) gdn_gated_norm_kernel(const float* __restrict__ o,
                                                                         const float* __restrict__ z, int64_t z_stride,
                                                                         const float* __restrict__ w, int n_v_heads,
                                                                         int D, int T, float eps,
                                                                         float* __restrict__ y,
                                                                         uint8_t* __restrict__ y_q8,
                                                                         int64_t q8_stride) {
  pdl_launch_dependents();
  pdl_wait();  // before any warp leaves (launch.cuh)
  const int gw = blockIdx.x * kNormWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (gw >= T * n_v_heads) return;  // whole warps leave together: warp_sum below stays full
  const int t = gw / n_v_heads, hd = gw % n_v_heads;
  const int64_t row = static_cast<int64_t>(t) * n_v_heads * D + static_cast<int64_t>(hd) * D;
  const float* x = o + row;
  const float* g = z + t * z_stride + static_cast<int64_t>(hd) * D;
  float ss = 0.0f;
  for (int i = lane; i < D; i += 32) ss = fmaf(x[i], x[i], ss);
  ss = warp_sum(ss);
  const float r = gated_norm_scale(ss, D, eps);
  for (int c0 = 0; c0 < D; c0 += 128) {  // uniform per warp: every lane reaches the quantizer
    const int i0 = c0 + 4 * lane;
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = i0 + e;
      v[e] = 0.0f;
      if (i < D) {
        v[e] = gated_norm_value(w[i], x[i], r, g[i]);
        y[row + i] = v[e];
      }
    }
    if (y_q8) {
      const int64_t col = static_cast<int64_t>(hd) * D + i0;  // column in the row of n_v_heads * D
      quantize_q8_1_quad(make_float4(v[0], v[1], v[2], v[3]), i0 < D, y_q8 + t * q8_stride, col / 32, lane & 7);
    }
  }
}

// ---- argument checks -----------------------------------------------------------------------------

std::string prefix(const char* op) { return std::string("gdn: ") + op + ": "; }

Status check_dims(const GdnDims& d, const char* op) {
  if (d.n_k_heads <= 0 || d.n_v_heads <= 0 || d.head_dim <= 0)
    return Status::error(prefix(op) + "dims must be positive (n_k_heads " + std::to_string(d.n_k_heads) +
                         ", n_v_heads " + std::to_string(d.n_v_heads) + ", head_dim " + std::to_string(d.head_dim) + ")");
  return Status::ok_status();
}

Status check_rows(int T, const char* op) {
  if (T < 1 || T > kMaxWindowRows)
    return Status::error(prefix(op) + "T must be 1.." + std::to_string(kMaxWindowRows) + " (got " + std::to_string(T) + ")");
  return Status::ok_status();
}

Status check_kernel(const GdnDims& d, const char* op) {
  if (d.conv_kernel < 1 || d.conv_kernel > kGdnMaxConvKernel)
    return Status::error(prefix(op) + "conv_kernel must be 1.." + std::to_string(kGdnMaxConvKernel) + " (got " +
                         std::to_string(d.conv_kernel) + ")");
  return Status::ok_status();
}

Status check_ptr(const void* ptr, const char* op, const char* name) {
  if (ptr == nullptr) return Status::error(prefix(op) + name + " is null");
  return Status::ok_status();
}

int blocks_for(int64_t n, int per_block) { return static_cast<int>((n + per_block - 1) / per_block); }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The checks gdn_recurrent and gdn_conv_recurrent share.
// gates_projected: the launch projects b and a itself (b, a and ba_stride unused).
Status check_recurrent(const GdnDims& d, const char* op, const float* b, const float* a, int64_t ba_stride,
                       const float* ssm_a, const float* dt_bias, const float* state_in, const float* state_out, int T,
                       const float* out, const float* b_keep, const float* a_keep, bool gates_projected = false) {
  STRATA_TRY(check_dims(d, op));
  STRATA_TRY(check_rows(T, op));
  if (!gates_projected) {
    STRATA_TRY(check_ptr(b, op, "b"));
    STRATA_TRY(check_ptr(a, op, "a"));
  }
  STRATA_TRY(check_ptr(ssm_a, op, "ssm_a"));
  STRATA_TRY(check_ptr(dt_bias, op, "dt_bias"));
  STRATA_TRY(check_ptr(state_in, op, "state_in"));
  STRATA_TRY(check_ptr(state_out, op, "state_out"));
  STRATA_TRY(check_ptr(out, op, "out"));
  if (!gdn_recurrent_supports_head_dim(d.head_dim))
    return Status::error(prefix(op) + "head_dim must be 32, 64 or 128 (got " + std::to_string(d.head_dim) + ")");
  if (!gates_projected && ba_stride < d.n_v_heads)
    return Status::error(prefix(op) + "ba_stride (" + std::to_string(ba_stride) + ") must be >= n_v_heads (" +
                         std::to_string(d.n_v_heads) + ")");
  if ((b_keep == nullptr) != (a_keep == nullptr))
    return Status::error(prefix(op) + "b_keep and a_keep must both be set or both be null");
  if (b_keep && !gates_projected && (b_keep == b || a_keep == a))
    return Status::error(prefix(op) + "b_keep / a_keep must not be the b / a they copy");
  return Status::ok_status();
}

// A gated norm output (gdn_gated_norm's, and the fused one's).
Status check_norm_out(const GdnDims& d, const char* op, const float* z, int64_t z_stride, const float* w,
                      const float* y, const void* y_q8, int64_t q8_stride) {
  STRATA_TRY(check_ptr(z, op, "z"));
  STRATA_TRY(check_ptr(w, op, "w"));
  STRATA_TRY(check_ptr(y, op, "y"));
  const int64_t value_dim = static_cast<int64_t>(d.n_v_heads) * d.head_dim;
  if (z_stride < value_dim)
    return Status::error(prefix(op) + "z_stride (" + std::to_string(z_stride) + ") must be >= n_v_heads * head_dim (" +
                         std::to_string(value_dim) + ")");
  if (y_q8) {
    if (d.head_dim % 32 != 0)
      return Status::error(prefix(op) + "a q8_1 output needs head_dim a multiple of 32 (got " +
                           std::to_string(d.head_dim) + ")");
    if (!aligned16(y_q8) || q8_stride % 16 != 0 || q8_stride < value_dim / 32 * 36)
      return Status::error(prefix(op) + "y_q8 must be 16-byte aligned with a stride that is a multiple of 16 bytes >= " +
                           std::to_string(value_dim / 32 * 36) + " (stride " + std::to_string(q8_stride) + ")");
  }
  return Status::ok_status();
}

// ---- launches ------------------------------------------------------------------------------------

using RecKernel = void (*)(RecArgs);

// The replay form (gdn_recurrent): c read from memory, no fusion.
cudaError_t launch_recurrent(const GdnDims& d, const RecArgs& p, Stream stream) {
  const dim3 grid(d.head_dim / kRecCols, d.n_v_heads);
  switch (d.head_dim) {
    case 32: return launch_kernel(gdn_recurrent_kernel<32, false>, grid, dim3(kRecThreads), 0, stream, p);
    case 64: return launch_kernel(gdn_recurrent_kernel<64, false>, grid, dim3(kRecThreads), 0, stream, p);
    default: return launch_kernel(gdn_recurrent_kernel<128, false>, grid, dim3(kRecThreads), 0, stream, p);
  }
}

template <int D>
RecKernel conv_kernel_for(bool norm) {
  return norm ? gdn_recurrent_kernel<D, true, true> : gdn_recurrent_kernel<D, true, false>;
}

// The decoder's form. With the fused norm, the head's D / 32 column CTAs form one cluster along
// x; grid.x is D / 32 too, so a CTA's cluster rank is its blockIdx.x.
cudaError_t launch_conv_recurrent(const GdnDims& d, const RecArgs& p, bool norm, Stream stream) {
  const int D = d.head_dim;
  const RecKernel kernel = D == 32   ? conv_kernel_for<32>(norm)
                           : D == 64 ? conv_kernel_for<64>(norm)
                                     : conv_kernel_for<128>(norm);
  const dim3 grid(D / kRecCols, d.n_v_heads);
  const unsigned cluster = norm ? static_cast<unsigned>(D / kRecCols) : 0u;
  return launch_kernel_clustered(kernel, grid, dim3(kRecThreads), 0, cluster, stream, p);
}

// The fields of RecArgs every form sets (the rest zero).
RecArgs rec_args(const GdnDims& d, const float* ssm_a, const float* dt_bias, const float* state_in, float* state_out,
                 int T, float* out, float* b_keep, float* a_keep) {
  RecArgs p{};
  p.ssm_a = ssm_a;
  p.dt_bias = dt_bias;
  p.state_in = state_in;
  p.state_out = state_out;
  p.out = out;
  p.b_keep = b_keep;
  p.a_keep = a_keep;
  p.n_k_heads = d.n_k_heads;
  p.n_v_heads = d.n_v_heads;
  p.conv_dim = d.conv_dim();
  p.T = T;
  return p;
}

}  // namespace

bool gdn_recurrent_supports_head_dim(int head_dim) { return head_dim == 32 || head_dim == 64 || head_dim == 128; }

bool gdn_fused_norm_supported(const GdnDims& d) {
  return gdn_recurrent_supports_head_dim(d.head_dim) && device_cc_major_at_least(9);
}

Status gdn_conv(const GdnDims& d, const float* m, int64_t m_stride, const float* conv_w, float* hist, int T, float* c,
                Stream stream) {
  STRATA_TRY(check_dims(d, "gdn_conv"));
  STRATA_TRY(check_kernel(d, "gdn_conv"));
  STRATA_TRY(check_rows(T, "gdn_conv"));
  STRATA_TRY(check_ptr(m, "gdn_conv", "m"));
  STRATA_TRY(check_ptr(conv_w, "gdn_conv", "conv_w"));
  STRATA_TRY(check_ptr(hist, "gdn_conv", "hist"));
  STRATA_TRY(check_ptr(c, "gdn_conv", "c"));
  const int conv_dim = d.conv_dim();
  if (m_stride < conv_dim)
    return Status::error("gdn: gdn_conv: m_stride (" + std::to_string(m_stride) + ") must be >= conv_dim (" +
                         std::to_string(conv_dim) + ")");
  STRATA_CUDA_TRY(launch_kernel(gdn_conv_kernel, dim3(blocks_for(conv_dim, kConvThreads)), dim3(kConvThreads), 0,
                                stream, m, m_stride, conv_w, hist, conv_dim, d.conv_kernel, T, c));
  return Status::ok_status();
}

Status gdn_conv_commit(const GdnDims& d, float* const* hists, int n_layers, int n, Stream stream) {
  const char* op = "gdn_conv_commit";
  STRATA_TRY(check_dims(d, op));
  STRATA_TRY(check_kernel(d, op));
  STRATA_TRY(check_ptr(hists, op, "hists"));
  if (n < 0 || n > kMaxWindowRows)
    return Status::error(std::string("gdn: ") + op + ": n must be 0.." + std::to_string(kMaxWindowRows) + " (got " +
                         std::to_string(n) + ")");
  if (n_layers < 0 || n_layers > 65535)
    return Status::error(std::string("gdn: ") + op + ": n_layers must be 0..65535 (got " + std::to_string(n_layers) + ")");
  if (n == 0 || n_layers == 0 || d.conv_kernel == 1) return Status::ok_status();  // nothing moves
  const int conv_dim = d.conv_dim();
  STRATA_CUDA_TRY(launch_kernel(gdn_conv_commit_kernel, dim3(blocks_for(conv_dim, kConvThreads), n_layers),
                                dim3(kConvThreads), 0, stream, hists, conv_dim, d.conv_kernel, n));
  return Status::ok_status();
}

Status gdn_recurrent(const GdnDims& d, const float* c, const float* b, const float* a, int64_t ba_stride,
                     const float* ssm_a, const float* dt_bias, const float* state_in, float* state_out, int T,
                     float* out, Stream stream, float* b_keep, float* a_keep) {
  const char* op = "gdn_recurrent";
  STRATA_TRY(check_recurrent(d, op, b, a, ba_stride, ssm_a, dt_bias, state_in, state_out, T, out, b_keep, a_keep));
  STRATA_TRY(check_ptr(c, op, "c"));
  RecArgs p = rec_args(d, ssm_a, dt_bias, state_in, state_out, T, out, b_keep, a_keep);
  p.c = c;
  p.b = b;
  p.a = a;
  p.ba_stride = ba_stride;
  STRATA_CUDA_TRY(launch_recurrent(d, p, stream));
  return Status::ok_status();
}

std::string gdn_gate_projection_refusal(const GdnDims& d, const GdnGateProjection& proj) {
  using quant::Type;
  if (proj.type != Type::F32 && proj.type != Type::F16 && proj.type != Type::BF16)
    return "proj.type must be F32, F16 or BF16";
  if (proj.w == nullptr || proj.u == nullptr) return "proj.w and proj.u must be set";
  if (proj.k <= 0 || proj.k % 8 != 0 || proj.k > (1 << 24))
    return "proj.k must be a positive multiple of 8, at most 2^24 (got " + std::to_string(proj.k) + ")";
  if (!aligned16(proj.w) || !aligned16(proj.u)) return "proj.w and proj.u must be 16-byte aligned";
  if (proj.u_stride < proj.k || proj.u_stride % 4 != 0)
    return "proj.u_stride must be a multiple of 4 and >= proj.k (got " + std::to_string(proj.u_stride) + ")";
  if (d.n_v_heads <= 0) return "n_v_heads must be positive";
  return {};
}

Status gdn_conv_recurrent(const GdnDims& d, const GdnConvRecurrentArgs& a, Stream stream) {
  const char* op = "gdn_conv_recurrent";
  const bool projected = a.proj.w != nullptr;
  STRATA_TRY(check_recurrent(d, op, a.b, a.a, a.ba_stride, a.ssm_a, a.dt_bias, a.state_in, a.state_out, a.T, a.out,
                             a.b_keep, a.a_keep, projected));
  if (projected) {
    if (const std::string why = gdn_gate_projection_refusal(d, a.proj); !why.empty())
      return Status::error(prefix(op) + why);
  } else if (a.proj.u) {
    return Status::error(prefix(op) + "proj.w is null while proj.u is set");  // a forgotten w would read b / a
  }
  STRATA_TRY(check_kernel(d, op));
  STRATA_TRY(check_ptr(a.m, op, "m"));
  STRATA_TRY(check_ptr(a.conv_w, op, "conv_w"));
  STRATA_TRY(check_ptr(a.hist, op, "hist"));
  STRATA_TRY(check_ptr(a.c, op, "c"));
  if (a.m_stride < d.conv_dim())
    return Status::error(prefix(op) + "m_stride (" + std::to_string(a.m_stride) + ") must be >= conv_dim (" +
                         std::to_string(d.conv_dim()) + ")");
  const GdnGatedNormOut& n = a.norm;
  const bool norm = n.y != nullptr;
  if (norm) {
    if (!gdn_fused_norm_supported(d))
      return Status::error(prefix(op) + "the fused gated norm needs thread-block clusters (compute capability 9.0+); "
                           "run gdn_gated_norm instead");
    STRATA_TRY(check_norm_out(d, "gdn_conv_recurrent: norm", n.z, n.z_stride, n.w, n.y, n.y_q8, n.q8_stride));
    if (n.y == a.out) return Status::error(prefix(op) + "norm.y must not be out (o is kept for a replay)");
  } else if (n.z || n.w || n.y_q8) {
    // A forgotten y would silently skip the norm the caller asked for.
    return Status::error(prefix(op) + "norm.y is null while other norm fields are set");
  }

  RecArgs p = rec_args(d, a.ssm_a, a.dt_bias, a.state_in, a.state_out, a.T, a.out, a.b_keep, a.a_keep);
  p.c = a.c;
  p.c_out = a.c;
  p.m = a.m;
  p.m_stride = a.m_stride;
  p.conv_w = a.conv_w;
  p.hist = a.hist;
  p.K = d.conv_kernel;
  p.b = a.b;
  p.a = a.a;
  p.ba_stride = a.ba_stride;
  if (projected) {
    p.proj_w = a.proj.w;
    p.proj_type = a.proj.type;
    p.proj_k = static_cast<int>(a.proj.k);
    p.u = a.proj.u;
    p.u_stride = a.proj.u_stride;
  }
  if (norm) {
    p.z = n.z;
    p.z_stride = n.z_stride;
    p.norm_w = n.w;
    p.eps = d.eps;
    p.y = n.y;
    p.y_q8 = static_cast<uint8_t*>(n.y_q8);
    p.q8_stride = n.q8_stride;
  }
  STRATA_CUDA_TRY(launch_conv_recurrent(d, p, norm, stream));
  return Status::ok_status();
}

Status gdn_conv_recurrent(const GdnDims& d, const float* m, int64_t m_stride, const float* conv_w, float* hist,
                          float* c, const float* b, const float* a, int64_t ba_stride, const float* ssm_a,
                          const float* dt_bias, const float* state_in, float* state_out, int T, float* out,
                          Stream stream, float* b_keep, float* a_keep) {
  GdnConvRecurrentArgs args;
  args.m = m;
  args.m_stride = m_stride;
  args.conv_w = conv_w;
  args.hist = hist;
  args.c = c;
  args.b = b;
  args.a = a;
  args.ba_stride = ba_stride;
  args.b_keep = b_keep;
  args.a_keep = a_keep;
  args.ssm_a = ssm_a;
  args.dt_bias = dt_bias;
  args.state_in = state_in;
  args.state_out = state_out;
  args.out = out;
  args.T = T;
  return gdn_conv_recurrent(d, args, stream);
}

Status gdn_gated_norm(const GdnDims& d, const float* o, const float* z, int64_t z_stride, const float* w, int T,
                      float* y, Stream stream, void* y_q8, int64_t q8_stride) {
  const char* op = "gdn_gated_norm";
  STRATA_TRY(check_dims(d, op));
  STRATA_TRY(check_rows(T, op));
  STRATA_TRY(check_ptr(o, op, "o"));
  STRATA_TRY(check_norm_out(d, op, z, z_stride, w, y, y_q8, q8_stride));
  const int warps = T * d.n_v_heads;
  STRATA_CUDA_TRY(launch_kernel(gdn_gated_norm_kernel, dim3(blocks_for(warps, kNormWarps)), dim3(kNormWarps * 32), 0,
                                stream, o, z, z_stride, w, d.n_v_heads, d.head_dim, T, d.eps, y,
                                static_cast<uint8_t*>(y_q8), q8_stride));
  return Status::ok_status();
}

}  // namespace strata::cuda
