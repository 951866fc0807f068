// Reference primitives of spec/model.md §3 on plain float spans: activations, the RMSNorm
// family, l2norm, partial interleaved M-RoPE, softmax and the deterministic top-k.
//
// Norm weights are the GGUF-stored ones: the converter has already folded the "+1" of the
// zero-centred norms into them (spec/gguf-layout.md §3), so every norm here is the plain
// y = x * rsqrt(mean(x^2) + eps) * w. The GDN gated norm never had a +1.
//
// Where transformers' fp32 code fixes an evaluation order that changes rounding (x/(1+e^-x)
// for SiLU, normalise then scale), these functions follow it; sums of squares accumulate in
// double, which is closer to exact than torch's float reduction (differences ~1e-7 relative).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace strata::reference {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch's CPU silu is x / (1 + exp(-x)), not x * sigmoid(x); they differ in the last bit.
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
// PyTorch default softplus (beta 1, threshold 20).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// y = x * rsqrt(mean(x^2) + eps) * w over n = x.size() values (w.size() == n). y may alias x.
void rms_norm(std::span<const float> x, std::span<const float> w, float eps, std::span<float> y);

// Grouped RMSNorm (HC hc_norm, PLE norms, spec §4/§5.4 and errata 2): one statistic per
// group of `group` values, the affine weight over the whole vector. y may alias x.
void grouped_rms_norm(std::span<const float> x, std::span<const float> w, int64_t group, float eps,
                      std::span<float> y);

// GDN output norm (spec §3 RMSNormGated): y = (x * rsqrt(mean(x^2) + eps)) * w * sigmoid(z).
// The activation is sigmoid (output_gate_type of the release). y may alias x.
void rms_norm_gated(std::span<const float> x, std::span<const float> z, std::span<const float> w, float eps,
                    std::span<float> y);

// l2norm of the GDN q/k heads: x * rsqrt(sum(x^2) + eps), eps inside the sum. In place.
void l2_norm(std::span<float> x, float eps = 1e-6f);

// Partial rotate-half rotary embedding with the interleaved M-RoPE section rule (spec §3).
// Frequency slot i (of n_rot/2) takes the H position when i % 3 == 1 and i < 3*sections[1],
// the W position when i % 3 == 2 and i < 3*sections[2], else the T position; text tokens
// pass pos = {p, p, p}, which is plain RoPE at p. Dims >= n_rot are left alone.
struct Rope {
  int n_rot = 0;                          // rotated dims (even)
  float theta = 10000.0f;                 // rope.freq_base
  std::array<int32_t, 3> sections{0, 0, 0};  // rope.dimension_sections[0..2]
};
using RopePos = std::array<int64_t, 3>;  // (T, H, W)
inline RopePos text_pos(int64_t p) { return {p, p, p}; }

// The cos/sin of one position: n_rot/2 values each, computed in fp32 the way transformers
// does (inv_freq = 1 / theta^(2i/n_rot) in fp32, angle = float(pos) * inv_freq).
struct RopeAngles {
  std::vector<float> cos, sin;
};
RopeAngles rope_angles(const Rope& rope, const RopePos& pos);
// Rotates one head vector in place: x[i] and x[i + n_rot/2] form a pair, i < n_rot/2.
void rope_apply(std::span<float> head, const RopeAngles& angles);

// Numerically stable softmax in place (max subtracted, sum in double).
void softmax(std::span<float> x);

// Indices of the k largest values, ordered by value descending; equal values keep the lower
// index first. This is Strata's documented tie rule wherever torch.topk's order is
// unspecified (MoE routing, QSA block selection). NaN is never expected here.
std::vector<int32_t> top_k(std::span<const float> x, int64_t k);

// Causal depthwise conv over time with SiLU, for the GDN short conv (dilation 1) and the PLE
// conv (dilation ngram_size). w is [channels, kernel] (GGUF ne [kernel, channels]); tap
// kernel-1 multiplies the current step, tap j the step (kernel-1-j)*dilation back.
// history holds the last (kernel-1)*dilation input rows (oldest first; zeros at the start)
// and is updated to the last rows of [history, x]. x and y are [n_tok, channels].
void causal_conv_silu(const float* w, int64_t channels, int64_t kernel, int64_t dilation, std::vector<float>& history,
                      const float* x, int64_t n_tok, float* y);

// Dot product with four double accumulators (fixed order, independent of callers).
float dot(const float* a, const float* b, int64_t n);

}  // namespace strata::reference
