// The arithmetic of the CUDA bench that needs no GPU: the bytes a window reads, the expected
// tokens of a speculative window, the least-squares slope of window time per row, and the
// derived numbers of one window run. Kept apart from cuda_runner.cpp so CPU builds test it.
#include <algorithm>
#include <cmath>

#include "strata/bench/bandwidth.h"
#include "strata/bench/cuda_bench.h"

namespace strata::bench {

namespace {

uint64_t stored_bytes(const model::Tensor& t) {
  return t ? static_cast<uint64_t>(t.rows()) * t.row_bytes : 0;
}

uint64_t rows_bytes(const model::MatrixRows& m) {
  return m.tensor ? static_cast<uint64_t>(m.n_rows) * m.tensor->row_bytes : 0;
}

// Every tensor of a trunk block but the routed experts (mirrors model::Block's fields; the
// MTP-only nextn tensors are absent in trunk blocks, so they add 0).
uint64_t block_dense_bytes(const model::Block& b) {
  uint64_t n = 0;
  for (const model::Tensor* t :
       {&b.hc_attn_norm, &b.hc_attn_down, &b.hc_attn_up, &b.hc_attn_inject, &b.hc_ffn_norm, &b.hc_ffn_down,
        &b.hc_ffn_up, &b.hc_ffn_inject, &b.attn_qkv, &b.attn_gate, &b.ssm_conv1d, &b.ssm_dt_bias, &b.ssm_a,
        &b.ssm_alpha, &b.ssm_beta, &b.ssm_norm, &b.ssm_out, &b.attn_q, &b.attn_k, &b.attn_v, &b.attn_output,
        &b.attn_q_norm, &b.attn_k_norm, &b.indexer_q_proj, &b.indexer_k_proj, &b.indexer_q_norm,
        &b.indexer_k_norm, &b.ffn_gate_inp, &b.ffn_gate_shexp, &b.ffn_up_shexp, &b.ffn_down_shexp,
        &b.ffn_gate_inp_shexp, &b.ple_key, &b.ple_value, &b.ple_norm_key, &b.ple_norm_query, &b.ple_norm_conv,
        &b.ple_conv1d}) {
    n += stored_bytes(*t);
  }
  return n;
}

uint64_t expert_bytes(const model::Block& b) {
  return rows_bytes(b.expert_gate(0)) + rows_bytes(b.expert_up(0)) + rows_bytes(b.expert_down(0));
}

}  // namespace

ByteCounts window_bytes(const model::ModelConfig& c, const model::Weights& w, int64_t n_before, int t) {
  ByteCounts out;
  out.dense = stored_bytes(w.output) + stored_bytes(w.output_hc_norm) + stored_bytes(w.output_hc_down) +
              stored_bytes(w.output_hc_up);
  out.embed = static_cast<uint64_t>(t) * w.token_embd.row_bytes;
  const uint64_t gdn_state = 2ull * sizeof(float) * c.ssm_n_v_heads * c.ssm_head_dim * c.ssm_head_dim;
  const uint64_t experts_read = std::min<uint64_t>(static_cast<uint64_t>(t) * c.n_expert_used, c.n_expert);
  for (uint32_t i = 0; i < c.plan.n_trunk; ++i) {
    const model::Block& b = w.blocks[i];
    const model::BlockPlan& plan = c.plan.blocks[i];
    out.dense += block_dense_bytes(b);
    out.experts += experts_read * expert_bytes(b);
    if (plan.mixer == model::Mixer::Gdn) {
      out.state += gdn_state;
    } else {
      out.kv += attention_read_bytes(c, plan, b.has_indexer(), n_before + t, t);
    }
  }
  return out;
}

double expected_window_tokens(int t, double a) {
  double sum = 0.0, term = 1.0;
  for (int i = 0; i < t; ++i) {
    sum += term;
    term *= a;
  }
  return sum;
}

Line least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n == 0) return {};
  double mx = 0.0, my = 0.0;
  for (size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxx = 0.0, sxy = 0.0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx <= 0.0) return {0.0, my};
  const double slope = sxy / sxx;
  return {slope, my - slope * mx};
}

void finish_window_run(CudaWindowRun& r, double roof_bytes_s) {
  r.decode_s = 0.0;
  for (double ms : r.window_ms) r.decode_s += ms / 1000.0;
  r.windows = static_cast<int64_t>(r.window_ms.size());
  r.window_ms_median = r.window_ms.empty() ? 0.0 : median(r.window_ms);
  r.ms_per_token = r.tokens > 0 ? 1000.0 * r.decode_s / static_cast<double>(r.tokens) : 0.0;
  r.tok_s = r.decode_s > 0 ? static_cast<double>(r.tokens) / r.decode_s : 0.0;
  r.bytes_per_token = r.tokens > 0 ? static_cast<double>(r.bytes.total()) / static_cast<double>(r.tokens) : 0.0;
  r.roof_fraction = roof_bytes_s > 0 ? r.bytes_per_token * r.tok_s / roof_bytes_s : 0.0;
  r.expected_tokens = expected_window_tokens(r.window, kProjectedAcceptance);
  r.projected_tok_s = r.window_ms_median > 0 ? 1000.0 * r.expected_tokens / r.window_ms_median : 0.0;
}

std::vector<CudaStage> with_shares(std::vector<CudaStage> stages) {
  double total = 0.0;
  for (const CudaStage& s : stages) total += s.ms;
  for (CudaStage& s : stages) s.share = total > 0 ? s.ms / total : 0.0;
  return stages;
}

}  // namespace strata::bench
