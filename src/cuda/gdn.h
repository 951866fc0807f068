// Gated DeltaNet decode kernels (spec/model.md §6), one window of T = 1..8 rows, in the GGUF's
// tiled value-head order: value head j uses key head j % n_k_heads (as src/reference/gdn.cpp).
// The decoder runs the projections (qkv -> m, attn_gate -> z, ssm_beta -> b, ssm_alpha -> a)
// with linear() (b and a can instead be projected inside gdn_conv_recurrent), then:
//   gdn_conv        causal depthwise conv (kernel K) + SiLU over the history and the T new rows
//   gdn_recurrent   l2norm of q/k, q / sqrt(d), beta = sigmoid(b), g = A * softplus(a + dt_bias),
//                   then per value head and row: M = exp(g) M; r = M^T k; M += k (x) beta (v - r);
//                   o = M^T q
//   gdn_gated_norm  y = rmsnorm(o) * w * sigmoid(z) per value head (optionally with y's q8_1 rows)
// and ssm_out with linear(). The recurrent state is fp32 [n_v_heads, d(k), d(v)] in VRAM.
// gdn_conv_recurrent is gdn_conv + gdn_recurrent in one launch (the decoder's window path); its
// GdnConvRecurrentArgs form can also take in the gated norm that follows it.
//
// Rollback (verify windows): the conv history buffer holds K - 1 + T_max rows; gdn_conv appends
// the window's rows after the K - 1 kept ones and gdn_conv_commit(n) keeps the K - 1 rows that
// end at accepted row n. gdn_recurrent reads state_in and writes state_out (they may alias), so a
// caller that keeps state_in can replay the accepted rows. Host-only header.
#pragma once

#include <cstdint>
#include <string>

#include "strata/common/status.h"
#include "strata/cuda/mmvq.h"

namespace strata::cuda {

inline constexpr int kGdnMaxConvKernel = 8;  // K limit: gdn_conv keeps a channel's K taps in registers

struct GdnDims {
  int n_k_heads = 0;   // ssm.group_count
  int n_v_heads = 0;   // ssm.time_step_rank
  int head_dim = 0;    // ssm.state_size (d(k) = d(v)); 128 in the release
  int conv_kernel = 0; // K
  float eps = 1e-6f;   // the gated norm's eps (l2norm uses 1e-6 inside the sum, spec §3)
  int conv_dim() const { return 2 * n_k_heads * head_dim + n_v_heads * head_dim; }
};

// m: [T, conv_dim] rows m + t * m_stride; conv_w: [conv_dim, K] f32 (tap j of channel ch at
// ch * K + j; tap K-1 multiplies the newest row); hist: [(K - 1 + T), conv_dim], rows 0..K-2 the
// previous pre-conv rows oldest first. Writes hist rows K-1 .. K-2+T = m and
// c[t, ch] = silu(sum_j conv_w[ch, j] * hist[t + j, ch]) for t < T, c contiguous [T, conv_dim].
Status gdn_conv(const GdnDims& d, const float* m, int64_t m_stride, const float* conv_w, float* hist, int T,
                float* c, Stream stream);

// After n accepted rows (0 <= n <= T), rows n .. n + K - 2 of each layer's history move to rows
// 0 .. K - 2, every layer in one launch. hists: a device array of n_layers history pointers
// (each gdn_conv's hist) that no kernel writes.
Status gdn_conv_commit(const GdnDims& d, float* const* hists, int n_layers, int n, Stream stream);

// c: [T, conv_dim] from gdn_conv (q | k | v, head-major); b, a: [T, n_v_heads] rows b + t * ba_stride;
// ssm_a: A = -exp(A_log) [n_v_heads]; dt_bias [n_v_heads]; out: [T, n_v_heads * head_dim].
// b_keep / a_keep (both or neither; not b / a themselves): b and a also copied there as
// [T, n_v_heads] contiguous rows, for a later replay when the projection wrote them as slices
// of a wider output.
Status gdn_recurrent(const GdnDims& d, const float* c, const float* b, const float* a, int64_t ba_stride,
                     const float* ssm_a, const float* dt_bias, const float* state_in, float* state_out, int T,
                     float* out, Stream stream, float* b_keep = nullptr, float* a_keep = nullptr);

// gdn_conv then gdn_recurrent in one launch: the same m / conv_w / hist / c contract as gdn_conv
// (c is written, for a later replay) and the same b / a / state / out contract as gdn_recurrent,
// with bit-identical results. Each CTA computes the conv outputs it reads itself.
Status gdn_conv_recurrent(const GdnDims& d, const float* m, int64_t m_stride, const float* conv_w, float* hist,
                          float* c, const float* b, const float* a, int64_t ba_stride, const float* ssm_a,
                          const float* dt_bias, const float* state_in, float* state_out, int T, float* out,
                          Stream stream, float* b_keep = nullptr, float* a_keep = nullptr);

// gdn_gated_norm inside gdn_conv_recurrent's launch: the same y (and y_q8) bit for bit, with the
// same contract as gdn_gated_norm's arguments of those names; o is still written to `out`.
struct GdnGatedNormOut {
  const float* z = nullptr;  // rows z + t * z_stride
  int64_t z_stride = 0;      // >= n_v_heads * head_dim
  const float* w = nullptr;  // [head_dim]
  float* y = nullptr;        // [T, n_v_heads * head_dim], contiguous
  void* y_q8 = nullptr;      // optional q8_1 rows of y at y_q8 + t * q8_stride (16-byte aligned)
  int64_t q8_stride = 0;
};

// The gate projection inside gdn_conv_recurrent's launch, in place of the b / a rows a separate
// mat-vec would write: w holds 2 * n_v_heads packed rows of k weights (F32, F16 or BF16; the beta
// rows, then the alpha rows: the decoder's concatenated beta|alpha matrix), u the window's input
// rows at u + t * u_stride. Each (row, head)'s two dots are summed in fp32 in a fixed order (the
// lanes' strided partials, the warp butterfly, then the warps in order). With b_keep / a_keep the
// projected values are kept there, as b / a would be.
struct GdnGateProjection {
  const void* w = nullptr;  // 16-byte aligned
  quant::Type type = quant::Type::F32;
  int64_t k = 0;            // a multiple of 8
  const float* u = nullptr; // 16-byte aligned
  int64_t u_stride = 0;     // floats, a multiple of 4, >= k
};

// Why gdn_conv_recurrent cannot take this projection of a d-shaped GDN; empty when it can.
std::string gdn_gate_projection_refusal(const GdnDims& d, const GdnGateProjection& proj);

// gdn_conv_recurrent's arguments (the positional form above documents each contract). With
// norm.y set the launch also writes the gated norm; with proj.w set it projects b and a itself
// (b, a and ba_stride then unused).
struct GdnConvRecurrentArgs {
  const float* m = nullptr;
  int64_t m_stride = 0;
  const float* conv_w = nullptr;
  float* hist = nullptr;
  float* c = nullptr;
  const float* b = nullptr;
  const float* a = nullptr;
  int64_t ba_stride = 0;
  float* b_keep = nullptr;
  float* a_keep = nullptr;
  const float* ssm_a = nullptr;
  const float* dt_bias = nullptr;
  const float* state_in = nullptr;
  float* state_out = nullptr;
  float* out = nullptr;
  GdnGatedNormOut norm;  // used when norm.y is set (gdn_fused_norm_supported)
  GdnGateProjection proj;  // used when proj.w is set
  int T = 0;
};

Status gdn_conv_recurrent(const GdnDims& d, const GdnConvRecurrentArgs& args, Stream stream);

// Whether gdn_conv_recurrent can take the gated norm on this device: it runs each value head's
// column CTAs as one thread-block cluster (compute capability 9.0+) to share the head's sums.
bool gdn_fused_norm_supported(const GdnDims& d);

// The head dims gdn_recurrent is compiled for (one kernel instance each): 32, 64 and 128.
bool gdn_recurrent_supports_head_dim(int head_dim);

// y[t, h, :] = o[t, h, :] * rsqrt(mean(o^2) + eps) * w * sigmoid(z[t, h, :]); z rows z + t * z_stride;
// y contiguous [T, n_v_heads * head_dim]. w: [head_dim], shared by every head. With y_q8 (head_dim
// a multiple of 32) y's q8_1 rows too, at y_q8 + t * q8_stride: the bytes quantize_q8_1 would
// write from y, so the out projection needs no quantize launch.
Status gdn_gated_norm(const GdnDims& d, const float* o, const float* z, int64_t z_stride, const float* w, int T,
                      float* y, Stream stream, void* y_q8 = nullptr, int64_t q8_stride = 0);

}  // namespace strata::cuda
