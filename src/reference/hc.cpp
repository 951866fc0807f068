// Hyper-connection mix and combine, in transformers' order (Qwen4ExpTextGatedResidual):
// Xn = grouped norm; r = silu(down(Xn) / S); G = sigmoid(up(r)); u = mean_s(G_s * Xn_s);
// alpha = 2 * sigmoid(inject(Xn) / S).
#include "strata/reference/hc.h"

#include "strata/reference/matmul.h"
#include "strata/reference/ops.h"

namespace strata::reference {

HcMix hc_mix(const HcWeights& w, int64_t n_streams, int64_t hidden, float eps, const std::vector<float>& x,
             int64_t n_tok, ThreadPool& pool) {
  const int64_t wide = n_streams * hidden;
  const float s = static_cast<float>(n_streams);
  std::vector<float> xn(x.size());
  for (int64_t t = 0; t < n_tok; ++t) {
    grouped_rms_norm({x.data() + t * wide, static_cast<size_t>(wide)}, f32_span(*w.norm), hidden, eps,
                     {xn.data() + t * wide, static_cast<size_t>(wide)});
  }
  std::vector<float> r = matmul(*w.down, xn, n_tok, pool);
  for (float& v : r) v = silu(v / s);
  std::vector<float> g = matmul(*w.up, r, n_tok, pool);
  HcMix out;
  out.u.assign(n_tok * hidden, 0.0f);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t j = 0; j < hidden; ++j) {
      // torch .mean over the stream axis: a sum in stream order, then a division by S.
      float acc = 0.0f;
      for (int64_t k = 0; k < n_streams; ++k) {
        const int64_t i = t * wide + k * hidden + j;
        acc += sigmoid(g[i]) * xn[i];
      }
      out.u[t * hidden + j] = acc / s;
    }
  }
  if (w.inject) {
    out.alpha = matmul(*w.inject, xn, n_tok, pool);
    for (float& a : out.alpha) a = 2.0f * sigmoid(a / s);
  }
  return out;
}

void hc_combine(std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& alpha,
                int64_t n_streams, int64_t hidden, int64_t n_tok) {
  const int64_t wide = n_streams * hidden;
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t k = 0; k < n_streams; ++k) {
      const float a = alpha[t * n_streams + k];
      float* row = x.data() + t * wide + k * hidden;
      const float* src = y.data() + t * hidden;
      for (int64_t j = 0; j < hidden; ++j) row[j] += src[j] * a;
    }
  }
}

}  // namespace strata::reference
