// Stage timing and read-byte accounting on the reference forward's stage sink. Which weights
// a stage reads is taken from the reference code it times (src/reference/*.cpp): keep the
// lists below in step with it.
#include "strata/bench/meter.h"

#include <algorithm>

#include "strata/reference/moe.h"

namespace strata::bench {

namespace {

using model::Block;
using model::Tensor;

// What the forward reads of a tensor: the fp32 copy when it has one (small vectors, F32
// tensors), else its stored blocks, which matmul dequantizes row by row.
uint64_t tensor_bytes(const Tensor& t) {
  if (!t) return 0;
  if (t.f32) return static_cast<uint64_t>(t.n_elements()) * 4;
  return static_cast<uint64_t>(t.rows()) * t.row_bytes;
}

uint64_t row_bytes(const Tensor& t) { return t.f32 ? static_cast<uint64_t>(t.cols()) * 4 : t.row_bytes; }

uint64_t rows_bytes(const model::MatrixRows& m) { return static_cast<uint64_t>(m.n_rows) * row_bytes(*m.tensor); }

uint64_t sum(std::initializer_list<const Tensor*> tensors) {
  uint64_t total = 0;
  for (const Tensor* t : tensors) total += tensor_bytes(*t);
  return total;
}

// hc_mix reads norm, down, up and inject (src/reference/hc.cpp).
uint64_t hc_bytes(const Tensor& norm, const Tensor& down, const Tensor& up, const Tensor& inject) {
  return sum({&norm, &down, &up, &inject});
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

ByteCounts& ByteCounts::operator+=(const ByteCounts& o) {
  dense += o.dense;
  experts += o.experts;
  embed += o.embed;
  ngram += o.ngram;
  kv += o.kv;
  state += o.state;
  return *this;
}

StageMeter::StageMeter(const reference::Model& model) : model_(model) {
  sink_ = [this](std::string_view stage, int block, int64_t pos0, int64_t n_rows, std::span<const float> rows) {
    on_stage(stage, block, pos0, n_rows, rows);
  };
  last_ = Clock::now();
}

void StageMeter::begin(Phase phase, const reference::SequenceState& state, bool count_bytes) {
  phase_ = phase;
  state_ = &state;
  counting_ = count_bytes;
  last_ = Clock::now();
}

void StageMeter::end() {
  const auto now = Clock::now();
  add_time(phase_, "other", seconds(now - last_));
  last_ = now;
}

void StageMeter::add_time(Phase phase, std::string_view stage, double s) {
  StageTimes& times = times_[static_cast<int>(phase)];
  auto it = times.find(stage);
  if (it == times.end()) it = times.emplace(std::string(stage), StageTime{}).first;
  it->second.seconds += s;
  ++it->second.calls;
}

void StageMeter::on_stage(std::string_view stage, int block, int64_t /*pos0*/, int64_t n_rows,
                          std::span<const float> rows) {
  const auto enter = Clock::now();
  add_time(phase_, stage, seconds(enter - last_));
  if (counting_) count(stage, block, n_rows, rows);
  last_ = Clock::now();
  overhead_s_ += seconds(last_ - enter);
}

uint64_t StageMeter::dense_stage_bytes(std::string_view stage, int block) const {
  const model::Weights& w = model_.weights();
  if (block < 0) {
    if (stage == "output_mix") return sum({&w.output_hc_norm, &w.output_hc_down, &w.output_hc_up});
    if (stage == "head") return tensor_bytes(w.output);
    return 0;  // embed: rows, counted apart
  }
  const Block& b = w.blocks[block];
  if (stage == "hc_attn_mix") return hc_bytes(b.hc_attn_norm, b.hc_attn_down, b.hc_attn_up, b.hc_attn_inject);
  if (stage == "hc_ffn_mix") return hc_bytes(b.hc_ffn_norm, b.hc_ffn_down, b.hc_ffn_up, b.hc_ffn_inject);
  if (stage == "gdn") {
    return sum({&b.attn_qkv, &b.attn_gate, &b.ssm_beta, &b.ssm_alpha, &b.ssm_conv1d, &b.ssm_a, &b.ssm_dt_bias,
                &b.ssm_norm, &b.ssm_out});
  }
  if (stage == "qsa") {
    uint64_t bytes = sum({&b.attn_q, &b.attn_k, &b.attn_v, &b.attn_output, &b.attn_q_norm, &b.attn_k_norm});
    // The indexer runs whenever the block is a QSA block, dense or not (attention.cpp).
    const bool qsa = model_.config().plan.blocks[block].compress_ratio > 0 && b.has_indexer();
    if (qsa) bytes += sum({&b.indexer_q_proj, &b.indexer_k_proj, &b.indexer_q_norm, &b.indexer_k_norm});
    return bytes;
  }
  if (stage == "router") return tensor_bytes(b.ffn_gate_inp);
  if (stage == "shared") return sum({&b.ffn_gate_shexp, &b.ffn_up_shexp, &b.ffn_down_shexp, &b.ffn_gate_inp_shexp});
  if (stage == "ple") {
    return sum({&b.ple_key, &b.ple_value, &b.ple_norm_key, &b.ple_norm_query, &b.ple_norm_conv, &b.ple_conv1d});
  }
  return 0;  // combines, experts (counted at the router), hc outputs: activations only
}

void StageMeter::count(std::string_view stage, int block, int64_t n_rows, std::span<const float> rows) {
  const model::Weights& w = model_.weights();
  const model::ModelConfig& c = model_.config();
  if (stage == "embed") {
    bytes_.embed += static_cast<uint64_t>(n_rows) * row_bytes(w.token_embd);  // one row per token (forward.cpp)
    return;
  }
  bytes_.dense += dense_stage_bytes(stage, block);
  if (block < 0) return;
  const model::BlockPlan& plan = c.plan.blocks[block];
  if (stage == "router") {
    bytes_.experts += expert_bytes(block, rows, n_rows);
  } else if (stage == "qsa") {
    bytes_.kv += kv_bytes(block, n_rows);
  } else if (stage == "gdn") {
    const reference::GdnState& g = state_->gdn[plan.slot];
    bytes_.state += (g.conv.size() + g.ssm.size()) * sizeof(float);
  } else if (stage == "ple") {
    // n_heads table rows per token (ple.cpp: tensor_row per head), and the conv history.
    bytes_.ngram += static_cast<uint64_t>(n_rows) * c.ple.n_heads * row_bytes(w.per_layer_token_embd);
    bytes_.state += state_->ple.conv.size() * sizeof(float);
  }
}

// The union of the experts the router picked for the forward's rows, routed exactly as
// moe_layer does; each picked expert's gate, up and down matrices are read once per call.
uint64_t StageMeter::expert_bytes(int block, std::span<const float> logits, int64_t n_rows) {
  const Block& b = model_.weights().blocks[block];
  const int64_t n_expert = b.ffn_gate_inp.rows();
  std::vector<char> used(n_expert, 0);
  for (int64_t t = 0; t < n_rows; ++t) {
    const reference::Routing r =
        reference::route(logits.subspan(t * n_expert, n_expert), model_.config().n_expert_used);
    for (int32_t e : r.experts) used[e] = 1;
  }
  uint64_t bytes = 0;
  for (int64_t e = 0; e < n_expert; ++e) {
    if (!used[e]) continue;
    bytes += rows_bytes(b.expert_gate(e)) + rows_bytes(b.expert_up(e)) + rows_bytes(b.expert_down(e));
    ++expert_groups_;
  }
  ++router_calls_;
  return bytes;
}

// K and V rows attention reads for the call's rows (attention.cpp). At the sink the cache
// already holds the new tokens. Dense (every block while QSA keeps all blocks, or no
// indexer): row t sees a prefix, so the union is every cached token. Sparse: row t reads its
// top_blocks * ratio selected tokens plus the incomplete block's tail and scores every
// complete block key; exact for one row, an upper bound (capped at the cache) for a window.
uint64_t StageMeter::kv_bytes(int block, int64_t n_rows) const {
  const model::ModelConfig& c = model_.config();
  const model::BlockPlan& plan = c.plan.blocks[block];
  const reference::AttnCache& cache = state_->attn[plan.slot];
  return attention_read_bytes(c, plan, model_.weights().blocks[block].has_indexer(), cache.n, n_rows);
}

uint64_t attention_read_bytes(const model::ModelConfig& c, const model::BlockPlan& plan, bool has_indexer, int64_t n_after,
                              int64_t n_rows) {
  const uint64_t token_bytes = 2ull * c.n_head_kv * c.head_dim * sizeof(float);
  const int64_t ratio = plan.compress_ratio;
  const bool qsa = ratio > 0 && has_indexer;
  const int64_t top_blocks = qsa ? c.indexer_top_k / ratio : 0;
  if (!qsa || n_after / ratio <= top_blocks) return static_cast<uint64_t>(n_after) * token_bytes;
  int64_t tokens = 0;
  for (int64_t t = 0; t < n_rows; ++t) {
    const int64_t visible = n_after - n_rows + t + 1;
    tokens += visible / ratio <= top_blocks ? visible : top_blocks * ratio + visible % ratio;
  }
  tokens = std::min(tokens, n_after);
  const uint64_t block_keys = static_cast<uint64_t>(n_after / ratio) * c.indexer_head_dim * sizeof(float);
  return static_cast<uint64_t>(tokens) * token_bytes + block_keys;
}

}  // namespace strata::bench
