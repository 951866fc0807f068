// MoE, following transformers' Qwen4ExpTextTopKRouter, Qwen4ExpTextExperts (eager loop) and
// Qwen4ExpTextSparseMoeBlock. Tokens are grouped by expert so each expert's matrices are
// converted once per call; the per-token sums still run in ascending expert id.
#include "strata/reference/moe.h"

#include <algorithm>

#include "strata/reference/matmul.h"
#include "strata/reference/ops.h"

namespace strata::reference {

Routing route(std::span<const float> logits, int64_t k) {
  std::vector<float> p(logits.begin(), logits.end());
  softmax(p);
  Routing r;
  r.experts = top_k(p, k);
  float sum = 0.0f;
  for (int32_t e : r.experts) sum += p[e];
  for (int32_t e : r.experts) r.weights.push_back(p[e] / sum);
  return r;
}

namespace {

// down(silu(gate x) * up x) for n rows of x (each [H]); out [n, H].
std::vector<float> swiglu(const model::MatrixRows& gate, const model::MatrixRows& up, const model::MatrixRows& down,
                          const std::vector<float>& x, int64_t n, ThreadPool& pool) {
  const int64_t h = gate.tensor->cols(), ff = gate.n_rows;
  std::vector<float> g(n * ff), a(n * ff), y(n * h);
  matmul(gate, x.data(), h, n, g.data(), ff, pool);
  matmul(up, x.data(), h, n, a.data(), ff, pool);
  for (int64_t i = 0; i < n * ff; ++i) g[i] = silu(g[i]) * a[i];
  matmul(down, g.data(), ff, n, y.data(), h, pool);
  return y;
}

model::MatrixRows whole(const model::Tensor& t) { return {&t, 0, t.rows()}; }

}  // namespace

std::vector<float> moe_layer(const model::Block& blk, int64_t n_expert_used, const std::vector<float>& u,
                             int64_t n_tok, int block_index, int64_t pos0, const StageSink* sink, ThreadPool& pool) {
  const int64_t h = blk.ffn_gate_inp.cols(), n_expert = blk.ffn_gate_inp.rows();

  const std::vector<float> logits = matmul(blk.ffn_gate_inp, u, n_tok, pool);  // [T, E]
  std::vector<Routing> routes(n_tok);
  for (int64_t t = 0; t < n_tok; ++t) routes[t] = route({logits.data() + t * n_expert, static_cast<size_t>(n_expert)}, n_expert_used);
  emit_stage(sink, "router", block_index, pos0, n_tok, logits);

  // Per expert, in ascending id: the tokens routed to it and their weights.
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(n_expert);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (size_t j = 0; j < routes[t].experts.size(); ++j) by_expert[routes[t].experts[j]].push_back({t, routes[t].weights[j]});
  }
  std::vector<float> y(n_tok * h, 0.0f);
  for (int64_t e = 0; e < n_expert; ++e) {
    const auto& hits = by_expert[e];
    if (hits.empty()) continue;
    std::vector<float> x(hits.size() * h);
    for (size_t i = 0; i < hits.size(); ++i) std::copy_n(u.data() + hits[i].first * h, h, x.data() + i * h);
    const std::vector<float> out = swiglu(blk.expert_gate(e), blk.expert_up(e), blk.expert_down(e), x,
                                          static_cast<int64_t>(hits.size()), pool);
    for (size_t i = 0; i < hits.size(); ++i) {
      float* dst = y.data() + hits[i].first * h;
      for (int64_t j = 0; j < h; ++j) dst[j] += out[i * h + j] * hits[i].second;
    }
  }
  emit_stage(sink, "experts", block_index, pos0, n_tok, y);

  std::vector<float> shared = swiglu(whole(blk.ffn_gate_shexp), whole(blk.ffn_up_shexp), whole(blk.ffn_down_shexp), u,
                                     n_tok, pool);
  for (int64_t t = 0; t < n_tok; ++t) {
    const float gate = sigmoid(dot(blk.ffn_gate_inp_shexp.f32, u.data() + t * h, h));
    for (int64_t j = 0; j < h; ++j) shared[t * h + j] *= gate;
  }
  emit_stage(sink, "shared", block_index, pos0, n_tok, shared);
  for (int64_t i = 0; i < n_tok * h; ++i) y[i] += shared[i];
  return y;
}

}  // namespace strata::reference
