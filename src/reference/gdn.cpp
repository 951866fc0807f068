// Gated DeltaNet: transformers' torch_recurrent_gated_delta_rule and
// torch_chunk_gated_delta_rule, per value head, in the GGUF tiled head order.
#include "strata/reference/gdn.h"

#include <cassert>
#include <cmath>

#include "strata/reference/matmul.h"
#include "strata/reference/ops.h"

namespace strata::reference {

namespace {

// Key head of value head j in the tiled order.
int64_t key_head(const GdnShape& s, int64_t j) { return j % s.n_k_heads; }

}  // namespace

void gdn_recurrent(const GdnShape& s, const float* q, const float* k, const float* v, const float* g,
                   const float* beta, int64_t n_tok, float* state, float* out, ThreadPool& pool) {
  const int64_t d = s.head_dim, nk = s.n_k_heads, nv = s.n_v_heads;
  const float sqrt_d = std::sqrt(static_cast<float>(d));
  pool.parallel_for(nv, [&](int64_t h0, int64_t h1) {
    std::vector<float> qs(d), mem(d), delta(d);
    for (int64_t h = h0; h < h1; ++h) {
      float* m = state + h * d * d;  // m[i * d + j]: key dim i, value dim j
      const int64_t kh = key_head(s, h);
      for (int64_t t = 0; t < n_tok; ++t) {
        const float* qt = q + (t * nk + kh) * d;
        const float* kt = k + (t * nk + kh) * d;
        const float* vt = v + (t * nv + h) * d;
        for (int64_t i = 0; i < d; ++i) qs[i] = qt[i] / sqrt_d;
        const float decay = std::exp(g[t * nv + h]);
        const float b = beta[t * nv + h];
        for (int64_t i = 0; i < d * d; ++i) m[i] *= decay;
        // kv_mem[j] = sum_i M[i, j] k[i]; delta = (v - kv_mem) * beta; M += k outer delta.
        for (int64_t j = 0; j < d; ++j) {
          double acc = 0.0;
          for (int64_t i = 0; i < d; ++i) acc += static_cast<double>(m[i * d + j]) * kt[i];
          mem[j] = static_cast<float>(acc);
        }
        for (int64_t j = 0; j < d; ++j) delta[j] = (vt[j] - mem[j]) * b;
        for (int64_t i = 0; i < d; ++i) {
          for (int64_t j = 0; j < d; ++j) m[i * d + j] += kt[i] * delta[j];
        }
        // The output reads the updated state.
        float* ot = out + (t * nv + h) * d;
        for (int64_t j = 0; j < d; ++j) {
          double acc = 0.0;
          for (int64_t i = 0; i < d; ++i) acc += static_cast<double>(m[i * d + j]) * qs[i];
          ot[j] = static_cast<float>(acc);
        }
      }
    }
  });
}

namespace {

// One value head over one chunk of C rows (zero-padded past n_valid), spec §6 "Prefill".
// Row-major C x d blocks: qc, kc, vc hold the head's (scaled) q, k and v; gc and bc its decay
// and beta. m is the running d x d state, updated in place; oc receives C x d outputs.
struct ChunkScratch {
  std::vector<float> cum, ut, attn, u, w, vnew, qd, kd;
  explicit ChunkScratch(int64_t c, int64_t d)
      : cum(c), ut(c * c), attn(c * c), u(c * d), w(c * d), vnew(c * d), qd(c * d), kd(c * d) {}
};

void chunk_step(int64_t c, int64_t d, const float* qc, const float* kc, const float* vc, const float* gc,
                const float* bc, float* m, float* oc, ChunkScratch& sc) {
  // Cumulative log-decay inside the chunk (sequential, as torch.cumsum).
  float run = 0.0f;
  for (int64_t i = 0; i < c; ++i) sc.cum[i] = run += gc[i];
  // D[i, j] = exp(cum_i - cum_j) for j <= i, else 0; A = (k*beta) k^T ⊙ D; Aq = q k^T ⊙ D.
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      const bool lower = j <= i;
      const float dij = lower ? std::exp(sc.cum[i] - sc.cum[j]) : 0.0f;
      double kk = 0.0, qk = 0.0;
      if (lower) {
        for (int64_t a = 0; a < d; ++a) {
          kk += static_cast<double>(kc[i * d + a] * bc[i]) * kc[j * d + a];
          qk += static_cast<double>(qc[i * d + a]) * kc[j * d + a];
        }
      }
      sc.ut[i * c + j] = static_cast<float>(kk) * dij;
      sc.attn[i * c + j] = static_cast<float>(qk) * dij;
    }
  }
  // Forward substitution with the unit lower-triangular L = I + strictly_lower(A) (the
  // diagonal of A is ignored, as solve_triangular(unitriangular=True) does):
  // U = L^-1 (v*beta), W = L^-1 (k*beta*exp(cum)).
  for (int64_t i = 0; i < c; ++i) {
    const float e = std::exp(sc.cum[i]);
    for (int64_t a = 0; a < d; ++a) {
      double u = static_cast<double>(vc[i * d + a] * bc[i]);
      double w = static_cast<double>((kc[i * d + a] * bc[i]) * e);
      for (int64_t j = 0; j < i; ++j) {
        u -= static_cast<double>(sc.ut[i * c + j]) * sc.u[j * d + a];
        w -= static_cast<double>(sc.ut[i * c + j]) * sc.w[j * d + a];
      }
      sc.u[i * d + a] = static_cast<float>(u);
      sc.w[i * d + a] = static_cast<float>(w);
    }
  }
  // q~ = q ⊙ exp(cum), k~ = k ⊙ exp(cum_last - cum).
  const float last = sc.cum[c - 1];
  for (int64_t i = 0; i < c; ++i) {
    const float eq = std::exp(sc.cum[i]);
    const float ek = std::exp(last - sc.cum[i]);
    for (int64_t a = 0; a < d; ++a) {
      sc.qd[i * d + a] = qc[i * d + a] * eq;
      sc.kd[i * d + a] = kc[i * d + a] * ek;
    }
  }
  // v_new = U - W M; out = q~ M + Aq v_new.
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t b = 0; b < d; ++b) {
      double wm = 0.0, qm = 0.0;
      for (int64_t a = 0; a < d; ++a) {
        wm += static_cast<double>(sc.w[i * d + a]) * m[a * d + b];
        qm += static_cast<double>(sc.qd[i * d + a]) * m[a * d + b];
      }
      sc.vnew[i * d + b] = sc.u[i * d + b] - static_cast<float>(wm);
      oc[i * d + b] = static_cast<float>(qm);
    }
  }
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t b = 0; b < d; ++b) {
      double acc = 0.0;
      for (int64_t j = 0; j <= i; ++j) acc += static_cast<double>(sc.attn[i * c + j]) * sc.vnew[j * d + b];
      oc[i * d + b] += static_cast<float>(acc);
    }
  }
  // M = exp(cum_last) M + k~^T v_new.
  const float lambda = std::exp(last);
  for (int64_t a = 0; a < d; ++a) {
    for (int64_t b = 0; b < d; ++b) {
      double acc = 0.0;
      for (int64_t i = 0; i < c; ++i) {
        acc += static_cast<double>(sc.kd[i * d + a]) * sc.vnew[i * d + b];
      }
      m[a * d + b] = m[a * d + b] * lambda + static_cast<float>(acc);
    }
  }
}

}  // namespace

void gdn_chunked(const GdnShape& s, const float* q, const float* k, const float* v, const float* g,
                 const float* beta, int64_t n_tok, float* state, float* out, ThreadPool& pool) {
  const int64_t d = s.head_dim, nk = s.n_k_heads, nv = s.n_v_heads, c = kGdnChunk;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));  // d ** -0.5
  const int64_t n_chunks = (n_tok + c - 1) / c;
  pool.parallel_for(nv, [&](int64_t h0, int64_t h1) {
    ChunkScratch sc(c, d);
    std::vector<float> qc(c * d), kc(c * d), vc(c * d), gc(c), bc(c), oc(c * d);
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t kh = key_head(s, h);
      float* m = state + h * d * d;
      for (int64_t ch = 0; ch < n_chunks; ++ch) {
        // Gather the chunk; rows past the sequence are zero (the padding of transformers).
        std::fill(qc.begin(), qc.end(), 0.0f);
        std::fill(kc.begin(), kc.end(), 0.0f);
        std::fill(vc.begin(), vc.end(), 0.0f);
        std::fill(gc.begin(), gc.end(), 0.0f);
        std::fill(bc.begin(), bc.end(), 0.0f);
        const int64_t n_valid = std::min(c, n_tok - ch * c);
        for (int64_t i = 0; i < n_valid; ++i) {
          const int64_t t = ch * c + i;
          for (int64_t a = 0; a < d; ++a) {
            qc[i * d + a] = q[(t * nk + kh) * d + a] * scale;
            kc[i * d + a] = k[(t * nk + kh) * d + a];
            vc[i * d + a] = v[(t * nv + h) * d + a];
          }
          gc[i] = g[t * nv + h];
          bc[i] = beta[t * nv + h];
        }
        chunk_step(c, d, qc.data(), kc.data(), vc.data(), gc.data(), bc.data(), m, oc.data(), sc);
        for (int64_t i = 0; i < n_valid; ++i) {
          std::copy(oc.begin() + i * d, oc.begin() + (i + 1) * d, out + ((ch * c + i) * nv + h) * d);
        }
      }
    }
  });
}

std::vector<float> gdn_layer(const model::ModelConfig& c, const model::Block& blk, GdnState& state,
                             const std::vector<float>& u, int64_t n_tok, GdnPath path, ThreadPool& pool) {
  const GdnShape s{c.ssm_n_k_heads, c.ssm_n_v_heads, c.ssm_head_dim};
  const int64_t d = s.head_dim, nk = s.n_k_heads, nv = s.n_v_heads;
  const int64_t conv_dim = c.ssm_conv_dim(), key_dim = nk * d, value_dim = nv * d;

  const std::vector<float> mixed = matmul(blk.attn_qkv, u, n_tok, pool);   // [T, conv_dim]
  const std::vector<float> z = matmul(blk.attn_gate, u, n_tok, pool);      // [T, nv*d]
  const std::vector<float> b = matmul(blk.ssm_beta, u, n_tok, pool);       // [T, nv]
  const std::vector<float> a = matmul(blk.ssm_alpha, u, n_tok, pool);      // [T, nv]

  std::vector<float> conv(n_tok * conv_dim);
  causal_conv_silu(blk.ssm_conv1d.f32, conv_dim, c.ssm_conv_kernel, 1, state.conv, mixed.data(), n_tok, conv.data());

  // Split [q | k | v] and l2-normalise q and k per key head (in the kernel, in fp32).
  std::vector<float> q(n_tok * key_dim), k(n_tok * key_dim), v(n_tok * value_dim);
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* row = conv.data() + t * conv_dim;
    std::copy(row, row + key_dim, q.data() + t * key_dim);
    std::copy(row + key_dim, row + 2 * key_dim, k.data() + t * key_dim);
    std::copy(row + 2 * key_dim, row + conv_dim, v.data() + t * value_dim);
    for (int64_t h = 0; h < nk; ++h) {
      l2_norm({q.data() + t * key_dim + h * d, static_cast<size_t>(d)});
      l2_norm({k.data() + t * key_dim + h * d, static_cast<size_t>(d)});
    }
  }
  // beta = sigmoid(b); g = A * softplus(a + dt_bias) with A = -exp(A_log) as stored in ssm_a.
  std::vector<float> beta(n_tok * nv), g(n_tok * nv);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t h = 0; h < nv; ++h) {
      beta[t * nv + h] = sigmoid(b[t * nv + h]);
      g[t * nv + h] = blk.ssm_a.f32[h] * softplus(a[t * nv + h] + blk.ssm_dt_bias.f32[h]);
    }
  }

  const bool recurrent = path == GdnPath::Recurrent || (path == GdnPath::Auto && n_tok == 1 && state.has_state);
  std::vector<float> core(n_tok * value_dim);
  if (recurrent) {
    gdn_recurrent(s, q.data(), k.data(), v.data(), g.data(), beta.data(), n_tok, state.ssm.data(), core.data(), pool);
  } else {
    gdn_chunked(s, q.data(), k.data(), v.data(), g.data(), beta.data(), n_tok, state.ssm.data(), core.data(), pool);
  }
  state.has_state = true;

  // Gated norm per value head (weight shared by heads), then ssm_out.
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t h = 0; h < nv; ++h) {
      const int64_t o = t * value_dim + h * d;
      rms_norm_gated({core.data() + o, static_cast<size_t>(d)}, {z.data() + o, static_cast<size_t>(d)},
                     f32_span(blk.ssm_norm), c.rms_eps, {core.data() + o, static_cast<size_t>(d)});
    }
  }
  return matmul(blk.ssm_out, core, n_tok, pool);
}

}  // namespace strata::reference
