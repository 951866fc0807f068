// Primitives of spec/model.md §3. See the header for the evaluation-order choices.
#include "strata/reference/ops.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace strata::reference {

namespace {

// 1 / sqrt(mean(x^2) + eps), the statistic every RMSNorm variant shares.
float inv_rms(const float* x, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(ss / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

}  // namespace

void rms_norm(std::span<const float> x, std::span<const float> w, float eps, std::span<float> y) {
  assert(w.size() == x.size() && y.size() == x.size());
  const float r = inv_rms(x.data(), static_cast<int64_t>(x.size()), eps);
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] * r) * w[i];
}

void grouped_rms_norm(std::span<const float> x, std::span<const float> w, int64_t group, float eps,
                      std::span<float> y) {
  assert(w.size() == x.size() && y.size() == x.size() && group > 0 && x.size() % group == 0);
  for (size_t g0 = 0; g0 < x.size(); g0 += group) {
    const float r = inv_rms(x.data() + g0, group, eps);
    for (size_t i = g0; i < g0 + group; ++i) y[i] = (x[i] * r) * w[i];
  }
}

void rms_norm_gated(std::span<const float> x, std::span<const float> z, std::span<const float> w, float eps,
                    std::span<float> y) {
  assert(z.size() == x.size() && w.size() == x.size() && y.size() == x.size());
  const float r = inv_rms(x.data(), static_cast<int64_t>(x.size()), eps);
  // transformers: hidden = weight * (x * rsqrt); hidden * act(gate).
  for (size_t i = 0; i < x.size(); ++i) y[i] = (w[i] * (x[i] * r)) * sigmoid(z[i]);
}

void l2_norm(std::span<float> x, float eps) {
  double ss = 0.0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const float r = 1.0f / std::sqrt(static_cast<float>(ss) + eps);
  for (float& v : x) v *= r;
}

RopeAngles rope_angles(const Rope& rope, const RopePos& pos) {
  const int half = rope.n_rot / 2;
  RopeAngles a;
  a.cos.resize(half);
  a.sin.resize(half);
  for (int i = 0; i < half; ++i) {
    // transformers: inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all fp32.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(rope.n_rot);
    const float inv_freq = 1.0f / std::pow(rope.theta, expo);
    int64_t p = pos[0];
    if (i % 3 == 1 && i < 3 * rope.sections[1]) p = pos[1];
    else if (i % 3 == 2 && i < 3 * rope.sections[2]) p = pos[2];
    const float angle = static_cast<float>(p) * inv_freq;
    a.cos[i] = std::cos(angle);
    a.sin[i] = std::sin(angle);
  }
  return a;
}

void rope_apply(std::span<float> head, const RopeAngles& angles) {
  const size_t half = angles.cos.size();
  assert(head.size() >= 2 * half);
  for (size_t i = 0; i < half; ++i) {
    const float x0 = head[i];
    const float x1 = head[i + half];
    // q*cos + rotate_half(q)*sin with rotate_half(q) = [-q2, q1].
    head[i] = x0 * angles.cos[i] + (-x1) * angles.sin[i];
    head[i + half] = x1 * angles.cos[i] + x0 * angles.sin[i];
  }
}

void softmax(std::span<float> x) {
  if (x.empty()) return;
  const float mx = *std::max_element(x.begin(), x.end());
  double sum = 0.0;
  for (float& v : x) {
    v = std::exp(v - mx);
    sum += v;
  }
  const float s = static_cast<float>(sum);
  for (float& v : x) v /= s;
}

std::vector<int32_t> top_k(std::span<const float> x, int64_t k) {
  std::vector<int32_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min<int64_t>(k, static_cast<int64_t>(x.size()));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    if (x[a] != x[b]) return x[a] > x[b];
    return a < b;
  });
  idx.resize(k);
  return idx;
}

void causal_conv_silu(const float* w, int64_t channels, int64_t kernel, int64_t dilation, std::vector<float>& history,
                      const float* x, int64_t n_tok, float* y) {
  const int64_t hist_rows = (kernel - 1) * dilation;
  assert(static_cast<int64_t>(history.size()) == hist_rows * channels);
  // ext = [history; x]: row hist_rows + t is the current step of token t.
  std::vector<float> ext(history);
  ext.insert(ext.end(), x, x + n_tok * channels);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t c = 0; c < channels; ++c) {
      double acc = 0.0;
      for (int64_t j = 0; j < kernel; ++j) {
        acc += static_cast<double>(w[c * kernel + j]) * ext[(t + j * dilation) * channels + c];
      }
      y[t * channels + c] = silu(static_cast<float>(acc));
    }
  }
  std::copy(ext.end() - hist_rows * channels, ext.end(), history.begin());
}

float dot(const float* a, const float* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<double>(a[i]) * b[i];
    s1 += static_cast<double>(a[i + 1]) * b[i + 1];
    s2 += static_cast<double>(a[i + 2]) * b[i + 2];
    s3 += static_cast<double>(a[i + 3]) * b[i + 3];
  }
  for (; i < n; ++i) s0 += static_cast<double>(a[i]) * b[i];
  return static_cast<float>((s0 + s1) + (s2 + s3));
}

}  // namespace strata::reference
