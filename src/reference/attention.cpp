// Full attention with QSA, following transformers' Qwen4ExpTextAttention (eager backend) and
// Qwen4ExpTextQSAIndexer.
#include "strata/reference/attention.h"

#include <cmath>

#include "strata/reference/matmul.h"
#include "strata/reference/ops.h"
#include "strata/reference/qsa.h"

namespace strata::reference {

namespace {

Rope rope_of(const model::ModelConfig& c) {
  return Rope{static_cast<int>(c.n_rot), c.rope_theta, {c.rope_sections[0], c.rope_sections[1], c.rope_sections[2]}};
}

// Appends the new tokens' raw index keys and computes the key of every block they complete.
void index_append(const model::ModelConfig& c, const model::Block& blk, uint32_t ratio, AttnCache& cache,
                  const std::vector<float>& raw, int64_t n_tok) {
  const int64_t d = c.indexer_head_dim;
  const int64_t n0 = cache.n;
  cache.index_k.insert(cache.index_k.end(), raw.begin(), raw.end());
  const int64_t done = static_cast<int64_t>(cache.block_k.size()) / d;
  const int64_t complete = (n0 + n_tok) / ratio;
  cache.block_k.resize(complete * d);
  for (int64_t b = done; b < complete; ++b) {
    qsa_block_key(cache.index_k.data() + b * ratio * d, ratio, d, f32_span(blk.indexer_k_norm), c.rms_eps, rope_of(c),
                  b * ratio, cache.block_k.data() + b * d);
  }
}

// The tokens each new query attends to (ascending), per query.
std::vector<std::vector<int32_t>> select_tokens(const model::ModelConfig& c, const model::Block& blk, uint32_t ratio,
                                                const AttnCache& cache, const std::vector<float>& u, int64_t n0,
                                                int64_t n_tok, ThreadPool& pool) {
  std::vector<std::vector<int32_t>> sel(n_tok);
  const bool qsa = ratio > 0 && blk.has_indexer();
  const int64_t top_blocks = qsa ? c.indexer_top_k / ratio : 0;
  std::vector<float> qi;
  if (qsa) qi = matmul(blk.indexer_q_proj, u, n_tok, pool);  // [T, nih * d]
  const int64_t nih = c.indexer_n_head, d = c.indexer_head_dim;
  pool.parallel_for(n_tok, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n_visible = n0 + t + 1;
      if (!qsa || n_visible / ratio <= top_blocks) {
        sel[t] = qsa_select(n_visible, 1, n_visible, {});  // dense: every visible token
        continue;
      }
      float* q = qi.data() + t * nih * d;
      const RopeAngles angles = rope_angles(rope_of(c), text_pos(n0 + t));
      for (int64_t h = 0; h < nih; ++h) {
        std::span<float> head(q + h * d, static_cast<size_t>(d));
        rms_norm(head, f32_span(blk.indexer_q_norm), c.rms_eps, head);
        rope_apply(head, angles);
      }
      const int64_t nb = n_visible / ratio;
      const std::vector<float> scores = qsa_block_scores(q, nih, d, cache.block_k.data(), nb);
      sel[t] = qsa_select(n_visible, ratio, top_blocks, scores);
    }
  });
  return sel;
}

}  // namespace

std::vector<float> attention_layer(const model::ModelConfig& c, const model::Block& blk, uint32_t compress_ratio,
                                   AttnCache& cache, const std::vector<float>& u, int64_t n_tok, ThreadPool& pool) {
  const int64_t nh = c.n_head, nkv = c.n_head_kv, hd = c.head_dim, group = nh / nkv;
  const int64_t n0 = cache.n;
  const Rope rope = rope_of(c);

  std::vector<float> qg = matmul(blk.attn_q, u, n_tok, pool);   // [T, nh * 2hd]: per head [q | gate]
  std::vector<float> k = matmul(blk.attn_k, u, n_tok, pool);    // [T, nkv * hd]
  const std::vector<float> v = matmul(blk.attn_v, u, n_tok, pool);
  for (int64_t t = 0; t < n_tok; ++t) {
    const RopeAngles angles = rope_angles(rope, text_pos(n0 + t));
    for (int64_t h = 0; h < nh; ++h) {
      std::span<float> q(qg.data() + t * nh * 2 * hd + h * 2 * hd, static_cast<size_t>(hd));
      rms_norm(q, f32_span(blk.attn_q_norm), c.rms_eps, q);
      rope_apply(q, angles);
    }
    for (int64_t g = 0; g < nkv; ++g) {
      std::span<float> kh(k.data() + (t * nkv + g) * hd, static_cast<size_t>(hd));
      rms_norm(kh, f32_span(blk.attn_k_norm), c.rms_eps, kh);
      rope_apply(kh, angles);
    }
  }
  cache.k.insert(cache.k.end(), k.begin(), k.end());
  cache.v.insert(cache.v.end(), v.begin(), v.end());

  const bool qsa = compress_ratio > 0 && blk.has_indexer();
  if (qsa) index_append(c, blk, compress_ratio, cache, matmul(blk.indexer_k_proj, u, n_tok, pool), n_tok);
  const std::vector<std::vector<int32_t>> sel = select_tokens(c, blk, compress_ratio, cache, u, n0, n_tok, pool);
  cache.n += n_tok;

  // softmax(q . k / sqrt(hd)) over the selected tokens, then the sigmoid gate.
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<float> o(n_tok * nh * hd);
  pool.parallel_for(n_tok * nh, [&](int64_t i0, int64_t i1) {
    std::vector<float> w;
    std::vector<double> acc(hd);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / nh, h = i % nh, g = h / group;
      const float* q = qg.data() + t * nh * 2 * hd + h * 2 * hd;
      const float* gate = q + hd;
      const std::vector<int32_t>& tokens = sel[t];
      w.resize(tokens.size());
      for (size_t j = 0; j < tokens.size(); ++j) w[j] = dot(q, cache.k.data() + (tokens[j] * nkv + g) * hd, hd) * scale;
      softmax(w);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t j = 0; j < tokens.size(); ++j) {
        const float* vj = cache.v.data() + (tokens[j] * nkv + g) * hd;
        for (int64_t a = 0; a < hd; ++a) acc[a] += static_cast<double>(w[j]) * vj[a];
      }
      float* out = o.data() + (t * nh + h) * hd;
      for (int64_t a = 0; a < hd; ++a) out[a] = static_cast<float>(acc[a]) * sigmoid(gate[a]);
    }
  });
  return matmul(blk.attn_output, o, n_tok, pool);
}

}  // namespace strata::reference
