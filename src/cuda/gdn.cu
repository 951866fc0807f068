// Gated DeltaNet decode kernels (src/cuda/gdn.h), following src/reference/gdn.cpp and
// reference::causal_conv_silu / l2_norm / rms_norm_gated operation by operation in fp32 (the
// reference sums in double; the kernels sum in a fixed fp32 order, so results are deterministic).
//
//   gdn_conv_kernel        one thread per channel: a sliding window of K values in registers
//   gdn_conv_commit_kernel one thread per channel: K - 1 rows through registers (safe in place)
//   gdn_recurrent_kernel   one CTA per (value head, 32 value columns); the CTA's slice of the
//                          state lives in registers for the whole window (read and written once)
//   gdn_gated_norm_kernel  one warp per (row, value head)
#include "gdn.h"

#include <string>

#include "common.cuh"

namespace strata::cuda {
namespace {

constexpr int kConvThreads = 128;

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }  // torch's CPU form
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }  // beta 1, threshold 20

// ---- gdn_conv ------------------------------------------------------------------------------------

// Thread ch loads its T new inputs first (independent loads, one memory latency instead of T),
// then walks the window: win[] holds the K inputs of output row t (oldest first), taken from the
// K - 1 history rows and then the new rows. Old history rows are only read and new rows only
// written, so no thread reads what another writes. m and hist are not __restrict__: a caller may
// project straight into hist rows K - 1 ...
__global__ void __launch_bounds__(kConvThreads) gdn_conv_kernel(const float* m, int64_t m_stride,
                                                                const float* __restrict__ conv_w, float* hist,
                                                                int conv_dim, int K, int T, float* __restrict__ c) {
  const int ch = blockIdx.x * kConvThreads + threadIdx.x;
  if (ch >= conv_dim) return;
  float w[kGdnMaxConvKernel], win[kGdnMaxConvKernel], xs[kMaxWindowRows];
#pragma unroll
  for (int j = 0; j < kGdnMaxConvKernel; ++j) {
    w[j] = j < K ? conv_w[static_cast<int64_t>(ch) * K + j] : 0.0f;
    win[j] = j < K - 1 ? hist[static_cast<int64_t>(j) * conv_dim + ch] : 0.0f;
  }
#pragma unroll
  for (int t = 0; t < kMaxWindowRows; ++t) xs[t] = t < T ? m[t * m_stride + ch] : 0.0f;
#pragma unroll
  for (int t = 0; t < kMaxWindowRows; ++t) {
    if (t >= T) break;
    const float x = xs[t];
    hist[static_cast<int64_t>(K - 1 + t) * conv_dim + ch] = x;
    // win[K - 1] = the newest row; taps in the reference's order j = 0 .. K - 1.
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kGdnMaxConvKernel; ++j) {
      if (j < K) acc = fmaf(w[j], j == K - 1 ? x : win[j], acc);
    }
    c[static_cast<int64_t>(t) * conv_dim + ch] = silu(acc);
    // Slide: drop the oldest input, append x.
#pragma unroll
    for (int j = 0; j + 1 < kGdnMaxConvKernel; ++j) {
      if (j < K - 2) win[j] = win[j + 1];
      else if (j == K - 2) win[j] = x;
    }
  }
}

// Rows n .. n + K - 2 to rows 0 .. K - 2 of one channel: every read happens before any write.
__global__ void __launch_bounds__(kConvThreads) gdn_conv_commit_kernel(float* __restrict__ hist, int conv_dim, int K,
                                                                       int n) {
  const int ch = blockIdx.x * kConvThreads + threadIdx.x;
  if (ch >= conv_dim) return;
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
  int n_k_heads, n_v_heads, conv_dim, T;
};

// Grid (D / 32, n_v_heads). Warp w owns key rows [w * R, (w + 1) * R) of the CTA's 32 columns,
// lane l column col0 + l, so M[i][j] of the slice sits in register m[i - w * R] of that lane. Each
// product M^T x is a per-warp partial over its R rows (ascending i) and then a sum of the
// kRecWarps partials in warp order, computed identically by every thread that needs it.
template <int D>
__global__ void __launch_bounds__(kRecThreads) gdn_recurrent_kernel(const RecArgs p) {
  static_assert(D % kRecCols == 0 && D % kRecWarps == 0, "head_dim must split into lanes and warps");
  constexpr int R = D / kRecWarps;
  __shared__ float qn[kMaxWindowRows][D], kn[kMaxWindowRows][D];  // l2-normalised (q also / sqrt(D))
  __shared__ float vs[kMaxWindowRows][kRecCols];
  __shared__ float decay[kMaxWindowRows], beta[kMaxWindowRows];
  __shared__ float part_r[kRecWarps][kRecCols], part_o[kRecWarps][kRecCols];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int h = blockIdx.y;
  const int col0 = blockIdx.x * kRecCols;
  const int row0 = warp * R;
  const int kh = h % p.n_k_heads;  // tiled order (reference key_head)
  const int64_t key_dim = static_cast<int64_t>(p.n_k_heads) * D;

  // The state slice first, so its loads are in flight during the prologue. Read once per window:
  // streaming (evict-first) loads and stores keep it from displacing weights in L2.
  const int64_t sbase = static_cast<int64_t>(h) * D * D + col0 + lane;
  float m[R];
#pragma unroll
  for (int r = 0; r < R; ++r) m[r] = __ldcs(p.state_in + sbase + static_cast<int64_t>(row0 + r) * D);

  // Prologue: q/k of every row normalised (one warp per vector), v of this CTA's columns, gates.
  const float sqrt_d = sqrtf(static_cast<float>(D));
  for (int vec = warp; vec < 2 * p.T; vec += kRecWarps) {
    const int t = vec >> 1;
    const bool is_q = (vec & 1) == 0;
    const float* x = p.c + static_cast<int64_t>(t) * p.conv_dim + (is_q ? 0 : key_dim) + static_cast<int64_t>(kh) * D;
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
  for (int i = static_cast<int>(threadIdx.x); i < p.T * kRecCols; i += kRecThreads) {
    const int t = i / kRecCols, l = i % kRecCols;
    vs[t][l] = p.c[static_cast<int64_t>(t) * p.conv_dim + 2 * key_dim + static_cast<int64_t>(h) * D + col0 + l];
  }
  if (static_cast<int>(threadIdx.x) < p.T) {
    const int t = threadIdx.x;
    const float bt = p.b[t * p.ba_stride + h], at = p.a[t * p.ba_stride + h];
    beta[t] = sigmoid(bt);
    decay[t] = expf(p.ssm_a[h] * softplus(at + p.dt_bias[h]));  // g = A * softplus(a + dt_bias)
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
    }
  }

  // Each element is read and written by the same thread, so state_in == state_out is safe.
#pragma unroll
  for (int r = 0; r < R; ++r) __stcs(p.state_out + sbase + static_cast<int64_t>(row0 + r) * D, m[r]);
}

// ---- gdn_gated_norm ------------------------------------------------------------------------------

constexpr int kNormWarps = 4;

// Warp per (row t, head hd): sum of squares in fp32 (lane-strided, then the warp butterfly).
__global__ void __launch_bounds__(kNormWarps * 32) gdn_gated_norm_kernel(const float* __restrict__ o,
                                                                         const float* __restrict__ z, int64_t z_stride,
                                                                         const float* __restrict__ w, int n_v_heads,
                                                                         int D, int T, float eps,
                                                                         float* __restrict__ y) {
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
  const float r = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
  for (int i = lane; i < D; i += 32) y[row + i] = (w[i] * (x[i] * r)) * sigmoid(g[i]);  // reference order
}

// ---- argument checks -----------------------------------------------------------------------------

Status check_dims(const GdnDims& d, const char* op) {
  const std::string f = std::string("gdn: ") + op + ": ";
  if (d.n_k_heads <= 0 || d.n_v_heads <= 0 || d.head_dim <= 0)
    return Status::error(f + "dims must be positive (n_k_heads " + std::to_string(d.n_k_heads) + ", n_v_heads " +
                         std::to_string(d.n_v_heads) + ", head_dim " + std::to_string(d.head_dim) + ")");
  return Status::ok_status();
}

Status check_rows(int T, const char* op) {
  if (T < 1 || T > kMaxWindowRows)
    return Status::error(std::string("gdn: ") + op + ": T must be 1.." + std::to_string(kMaxWindowRows) + " (got " +
                         std::to_string(T) + ")");
  return Status::ok_status();
}

Status check_kernel(const GdnDims& d, const char* op) {
  if (d.conv_kernel < 1 || d.conv_kernel > kGdnMaxConvKernel)
    return Status::error(std::string("gdn: ") + op + ": conv_kernel must be 1.." + std::to_string(kGdnMaxConvKernel) +
                         " (got " + std::to_string(d.conv_kernel) + ")");
  return Status::ok_status();
}

Status check_ptr(const void* ptr, const char* op, const char* name) {
  if (ptr == nullptr) return Status::error(std::string("gdn: ") + op + ": " + name + " is null");
  return Status::ok_status();
}

int blocks_for(int64_t n, int per_block) { return static_cast<int>((n + per_block - 1) / per_block); }

}  // namespace

bool gdn_recurrent_supports_head_dim(int head_dim) { return head_dim == 32 || head_dim == 64 || head_dim == 128; }

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
  gdn_conv_kernel<<<blocks_for(conv_dim, kConvThreads), kConvThreads, 0, stream>>>(m, m_stride, conv_w, hist, conv_dim,
                                                                                     d.conv_kernel, T, c);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

Status gdn_conv_commit(const GdnDims& d, float* hist, int n, Stream stream) {
  STRATA_TRY(check_dims(d, "gdn_conv_commit"));
  STRATA_TRY(check_kernel(d, "gdn_conv_commit"));
  STRATA_TRY(check_ptr(hist, "gdn_conv_commit", "hist"));
  if (n < 0 || n > kMaxWindowRows)
    return Status::error("gdn: gdn_conv_commit: n must be 0.." + std::to_string(kMaxWindowRows) + " (got " +
                         std::to_string(n) + ")");
  if (n == 0 || d.conv_kernel == 1) return Status::ok_status();  // nothing moves
  const int conv_dim = d.conv_dim();
  gdn_conv_commit_kernel<<<blocks_for(conv_dim, kConvThreads), kConvThreads, 0, stream>>>(hist, conv_dim, d.conv_kernel,
                                                                                            n);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

Status gdn_recurrent(const GdnDims& d, const float* c, const float* b, const float* a, int64_t ba_stride,
                     const float* ssm_a, const float* dt_bias, const float* state_in, float* state_out, int T,
                     float* out, Stream stream) {
  STRATA_TRY(check_dims(d, "gdn_recurrent"));
  STRATA_TRY(check_rows(T, "gdn_recurrent"));
  STRATA_TRY(check_ptr(c, "gdn_recurrent", "c"));
  STRATA_TRY(check_ptr(b, "gdn_recurrent", "b"));
  STRATA_TRY(check_ptr(a, "gdn_recurrent", "a"));
  STRATA_TRY(check_ptr(ssm_a, "gdn_recurrent", "ssm_a"));
  STRATA_TRY(check_ptr(dt_bias, "gdn_recurrent", "dt_bias"));
  STRATA_TRY(check_ptr(state_in, "gdn_recurrent", "state_in"));
  STRATA_TRY(check_ptr(state_out, "gdn_recurrent", "state_out"));
  STRATA_TRY(check_ptr(out, "gdn_recurrent", "out"));
  if (!gdn_recurrent_supports_head_dim(d.head_dim))
    return Status::error("gdn: gdn_recurrent: head_dim must be 32, 64 or 128 (got " + std::to_string(d.head_dim) + ")");
  if (ba_stride < d.n_v_heads)
    return Status::error("gdn: gdn_recurrent: ba_stride (" + std::to_string(ba_stride) + ") must be >= n_v_heads (" +
                         std::to_string(d.n_v_heads) + ")");
  const RecArgs p{c, b, a, ba_stride, ssm_a, dt_bias, state_in, state_out, out,
                  d.n_k_heads, d.n_v_heads, d.conv_dim(), T};
  const dim3 grid(d.head_dim / kRecCols, d.n_v_heads);
  switch (d.head_dim) {
    case 32: gdn_recurrent_kernel<32><<<grid, kRecThreads, 0, stream>>>(p); break;
    case 64: gdn_recurrent_kernel<64><<<grid, kRecThreads, 0, stream>>>(p); break;
    default: gdn_recurrent_kernel<128><<<grid, kRecThreads, 0, stream>>>(p); break;
  }
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

Status gdn_gated_norm(const GdnDims& d, const float* o, const float* z, int64_t z_stride, const float* w, int T,
                      float* y, Stream stream) {
  STRATA_TRY(check_dims(d, "gdn_gated_norm"));
  STRATA_TRY(check_rows(T, "gdn_gated_norm"));
  STRATA_TRY(check_ptr(o, "gdn_gated_norm", "o"));
  STRATA_TRY(check_ptr(z, "gdn_gated_norm", "z"));
  STRATA_TRY(check_ptr(w, "gdn_gated_norm", "w"));
  STRATA_TRY(check_ptr(y, "gdn_gated_norm", "y"));
  const int64_t value_dim = static_cast<int64_t>(d.n_v_heads) * d.head_dim;
  if (z_stride < value_dim)
    return Status::error("gdn: gdn_gated_norm: z_stride (" + std::to_string(z_stride) + ") must be >= n_v_heads * head_dim (" +
                         std::to_string(value_dim) + ")");
  const int warps = T * d.n_v_heads;
  gdn_gated_norm_kernel<<<blocks_for(warps, kNormWarps), kNormWarps * 32, 0, stream>>>(o, z, z_stride, w, d.n_v_heads,
                                                                                       d.head_dim, T, d.eps, y);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

}  // namespace strata::cuda
