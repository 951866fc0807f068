// A tiny random qwen4exp GGUF for tests: every key of spec/gguf-layout.md §2 and every tensor
// of §3 at a small geometry, written with the GGUF writer. Header-only so the model_config
// tests can share it. The tensor list here is written from the spec independently of
// src/model/weights.cpp, so binding is checked against a second reading of the layout.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "strata/gguf/writer.h"
#include "strata/quant/quantize.h"
#include "strata/quant/scalar.h"
#include "strata/reference/ple.h"

namespace strata::testing {

struct TinySpec {
  uint32_t n_embd = 32, hc = 4, rank = 8, vocab = 64;
  uint32_t n_trunk = 4, interval = 4;
  bool mtp = true;
  uint32_t n_head = 4, n_head_kv = 2, head_dim = 16, n_rot = 8;
  float theta = 10000.0f;
  bool qsa = true;
  uint32_t idx_heads = 2, idx_dim = 16, top_k = 8, ratio = 4;
  uint32_t nk = 2, nv = 4, ssm_d = 8, conv = 4;
  uint32_t n_expert = 8, used = 2, ff = 16, ff_sh = 16;
  bool ple = true;
  int32_t ple_layer = 1;
  uint32_t ngram = 3, heads_per = 2, row_dim = 8, ple_conv = 4, eos = 5, vocab_base = 50;
  bool fused_experts = false;
  bool quantized = false;   // Q8_0 matrices (where the row length allows) and F16 conv kernels
  uint64_t seed = 1;

  uint32_t wide() const { return hc * n_embd; }
  uint32_t blocks() const { return n_trunk + (mtp ? 1 : 0); }
  bool is_attn(uint32_t b) const { return b >= n_trunk || (b + 1) % interval == 0; }
  uint32_t ple_heads() const { return (ngram - 1) * heads_per; }
};

inline void tiny_metadata(const TinySpec& s, gguf::Metadata& md) {
  const auto key = [](const char* k) { return std::string("qwen4exp.") + k; };
  md.set("general.architecture", "qwen4exp");
  md.set("general.name", "tiny-test");
  md.set(key("block_count"), uint32_t{s.blocks()});
  if (s.mtp) md.set(key("nextn_predict_layers"), uint32_t{1});
  md.set(key("context_length"), uint32_t{4096});
  md.set(key("embedding_length"), uint32_t{s.n_embd});
  md.set(key("attention.head_count"), uint32_t{s.n_head});
  md.set(key("attention.head_count_kv"), uint32_t{s.n_head_kv});
  md.set(key("attention.key_length"), uint32_t{s.head_dim});
  md.set(key("attention.value_length"), uint32_t{s.head_dim});
  md.set(key("attention.layer_norm_rms_epsilon"), 1e-6f);
  md.set(key("rope.freq_base"), s.theta);
  md.set(key("rope.dimension_count"), uint32_t{s.n_rot});
  md.set(key("rope.dimension_sections"), gguf::Value::array<int32_t>({11, 11, 10, 0}));
  md.set(key("expert_count"), uint32_t{s.n_expert});
  md.set(key("expert_used_count"), uint32_t{s.used});
  md.set(key("expert_feed_forward_length"), uint32_t{s.ff});
  md.set(key("expert_shared_feed_forward_length"), uint32_t{s.ff_sh});
  md.set(key("ssm.conv_kernel"), uint32_t{s.conv});
  md.set(key("ssm.state_size"), uint32_t{s.ssm_d});
  md.set(key("ssm.group_count"), uint32_t{s.nk});
  md.set(key("ssm.time_step_rank"), uint32_t{s.nv});
  md.set(key("ssm.inner_size"), uint32_t{s.nv * s.ssm_d});
  md.set(key("full_attention_interval"), uint32_t{s.interval});
  md.set(key("hyper_connection.count"), uint32_t{s.hc});
  md.set(key("hyper_connection.low_rank"), uint32_t{s.rank});
  if (s.qsa) {
    md.set(key("attention.indexer.head_count"), uint32_t{s.idx_heads});
    md.set(key("attention.indexer.key_length"), uint32_t{s.idx_dim});
    md.set(key("attention.indexer.top_k"), uint32_t{s.top_k});
    std::vector<int32_t> ratios;
    for (uint32_t b = 0; b < s.blocks(); ++b) ratios.push_back(b < s.n_trunk && s.is_attn(b) ? int32_t(s.ratio) : 0);
    md.set(key("attention.compress_ratios"), gguf::Value::array<int32_t>(ratios));
  }
  if (s.ple) {
    const std::vector<uint64_t> sizes = reference::ple_head_sizes(s.vocab_base, s.ple_heads(), 0);
    md.set(key("ple.layers"), gguf::Value::array<int32_t>({s.ple_layer}));
    md.set(key("ple.ngram_size"), uint32_t{s.ngram});
    md.set(key("ple.heads_per_ngram"), uint32_t{s.heads_per});
    md.set(key("ple.conv_kernel"), uint32_t{s.ple_conv});
    md.set(key("ple.eos_token_id"), uint32_t{s.eos});
    md.set(key("embedding_length_per_layer_input"), uint32_t{s.row_dim});
    md.set(key("ple.layer_multipliers"), gguf::Value::array<uint64_t>(reference::ple_multipliers(s.vocab, s.ngram, 0, 1234)));
    md.set(key("ple.head_offsets"), gguf::Value::array<uint64_t>(reference::ple_head_offsets(sizes)));
    md.set(key("ple.head_vocab_sizes"), gguf::Value::array<uint64_t>(sizes));
  }
}

// How a tensor's values are drawn.
enum class Init { Norm, Matrix, Small, Conv, SsmA, DtBias };

class TinyWriter {
 public:
  explicit TinyWriter(const TinySpec& s) : s_(s), rng_(s.seed) { tiny_metadata(s, w_.metadata()); }

  // Test hooks: tensors to leave out, and shapes to write instead of the right ones.
  std::set<std::string> skip;
  std::map<std::string, std::vector<int64_t>> reshape;

  void add(const std::string& name, std::vector<int64_t> ne, Init init, bool may_quantize = true) {
    if (skip.contains(name)) return;
    if (auto it = reshape.find(name); it != reshape.end()) ne = it->second;
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> v(n);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    const float mscale = 1.0f / std::sqrt(static_cast<float>(ne[0]));
    for (float& x : v) {
      switch (init) {
        case Init::Norm: x = 1.0f + 0.1f * normal(rng_); break;   // stored with the +1 folded in
        case Init::Matrix: x = mscale * normal(rng_); break;
        case Init::Small: x = 0.3f * mscale * normal(rng_); break;
        case Init::Conv: x = 0.4f * normal(rng_); break;
        case Init::SsmA: x = -std::exp(std::log(0.5f) + uni(rng_) * std::log(8.0f)); break;  // A = -exp(A_log)
        case Init::DtBias: x = 0.5f * normal(rng_); break;
      }
    }
    const bool q8 = s_.quantized && may_quantize && init == Init::Matrix && ne[0] % 32 == 0;
    const bool f16 = s_.quantized && init == Init::Conv;
    std::vector<uint8_t> bytes;
    quant::Type type = quant::Type::F32;
    if (q8) {
      type = quant::Type::Q8_0;
      bytes.resize(n / 32 * 34);
      quant::quantize_row_q8_0(v.data(), bytes.data(), n);
    } else if (f16) {
      type = quant::Type::F16;
      bytes.resize(n * 2);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = quant::fp32_to_fp16(v[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    } else {
      bytes.resize(n * 4);
      std::memcpy(bytes.data(), v.data(), n * 4);
    }
    status_ = w_.add_tensor(name, type, std::move(ne), gguf::TensorData::own(std::move(bytes)));
    if (!status_.ok()) failed_ = status_;
  }

  // Every tensor of the layout (spec/gguf-layout.md §3).
  void add_all() {
    const int64_t H = s_.n_embd, W = s_.wide(), R = s_.rank;
    add("token_embd.weight", {H, s_.vocab}, Init::Matrix);
    add("output.weight", {H, s_.vocab}, Init::Matrix);
    add("output_hc_norm.weight", {W}, Init::Norm);
    add("output_hc_down.weight", {W, R}, Init::Matrix);
    add("output_hc_up.weight", {R, W}, Init::Matrix);
    if (s_.ple) {
      const std::vector<uint64_t> sizes = reference::ple_head_sizes(s_.vocab_base, s_.ple_heads(), 0);
      uint64_t total = 0;
      for (uint64_t z : sizes) total += z;
      add("per_layer_token_embd.weight", {s_.row_dim, static_cast<int64_t>((total + 127) / 128 * 128)}, Init::Conv);
    }
    for (uint32_t b = 0; b < s_.blocks(); ++b) add_block(b);
  }

  void add_block(uint32_t b) {
    const int64_t H = s_.n_embd, W = s_.wide(), R = s_.rank, S = s_.hc;
    const std::string p = "blk." + std::to_string(b) + ".";
    for (const char* site : {"attn", "ffn"}) {
      add(p + "hc_" + site + "_norm.weight", {W}, Init::Norm);
      add(p + "hc_" + site + "_down.weight", {W, R}, Init::Matrix);
      add(p + "hc_" + site + "_up.weight", {R, W}, Init::Matrix);
      add(p + "hc_" + site + "_inject.weight", {W, S}, Init::Small);
    }
    if (s_.is_attn(b)) {
      add(p + "attn_q.weight", {H, 2 * s_.n_head * s_.head_dim}, Init::Matrix);
      add(p + "attn_k.weight", {H, s_.n_head_kv * s_.head_dim}, Init::Matrix);
      add(p + "attn_v.weight", {H, s_.n_head_kv * s_.head_dim}, Init::Matrix);
      add(p + "attn_output.weight", {s_.n_head * s_.head_dim, H}, Init::Matrix);
      add(p + "attn_q_norm.weight", {s_.head_dim}, Init::Norm);
      add(p + "attn_k_norm.weight", {s_.head_dim}, Init::Norm);
      if (s_.qsa) {
        add(p + "indexer.q_proj.weight", {H, s_.idx_heads * s_.idx_dim}, Init::Matrix, false);  // BF16 in the wild; F32 here
        add(p + "indexer.k_proj.weight", {H, s_.idx_dim}, Init::Matrix, false);
        add(p + "indexer.q_norm.weight", {s_.idx_dim}, Init::Norm);
        add(p + "indexer.k_norm.weight", {s_.idx_dim}, Init::Norm);
      }
    } else {
      const int64_t conv_dim = 2 * s_.nk * s_.ssm_d + s_.nv * s_.ssm_d;
      add(p + "attn_qkv.weight", {H, conv_dim}, Init::Matrix);
      add(p + "attn_gate.weight", {H, s_.nv * s_.ssm_d}, Init::Matrix);
      add(p + "ssm_conv1d.weight", {s_.conv, conv_dim}, Init::Conv);
      add(p + "ssm_dt.bias", {s_.nv}, Init::DtBias);
      add(p + "ssm_a", {s_.nv}, Init::SsmA);
      add(p + "ssm_alpha.weight", {H, s_.nv}, Init::Matrix);
      add(p + "ssm_beta.weight", {H, s_.nv}, Init::Matrix);
      add(p + "ssm_norm.weight", {s_.ssm_d}, Init::Norm);
      add(p + "ssm_out.weight", {s_.nv * s_.ssm_d, H}, Init::Matrix);
    }
    add(p + "ffn_gate_inp.weight", {H, s_.n_expert}, Init::Matrix);
    if (s_.fused_experts) {
      add(p + "ffn_gate_up_exps.weight", {H, 2 * s_.ff, s_.n_expert}, Init::Matrix);
    } else {
      add(p + "ffn_gate_exps.weight", {H, s_.ff, s_.n_expert}, Init::Matrix);
      add(p + "ffn_up_exps.weight", {H, s_.ff, s_.n_expert}, Init::Matrix);
    }
    add(p + "ffn_down_exps.weight", {s_.ff, H, s_.n_expert}, Init::Matrix);
    add(p + "ffn_gate_shexp.weight", {H, s_.ff_sh}, Init::Matrix);
    add(p + "ffn_up_shexp.weight", {H, s_.ff_sh}, Init::Matrix);
    add(p + "ffn_down_shexp.weight", {s_.ff_sh, H}, Init::Matrix);
    add(p + "ffn_gate_inp_shexp.weight", {H}, Init::Matrix);
    if (s_.ple && static_cast<int32_t>(b) == s_.ple_layer) {
      const int64_t e = s_.ple_heads() * s_.row_dim;
      add(p + "ple_key.weight", {e, W}, Init::Matrix);
      add(p + "ple_value.weight", {e, H}, Init::Matrix);
      add(p + "ple_norm_key.weight", {W}, Init::Norm);
      add(p + "ple_norm_query.weight", {W}, Init::Norm);
      add(p + "ple_norm_conv.weight", {W}, Init::Norm);
      add(p + "ple_conv1d.weight", {s_.ple_conv, W}, Init::Conv);
    }
    if (b >= s_.n_trunk) {
      add(p + "nextn.eh_proj.weight", {2 * H, H}, Init::Matrix);
      add(p + "nextn.enorm.weight", {H}, Init::Norm);
      add(p + "nextn.hnorm.weight", {W}, Init::Norm);
      add(p + "nextn.hc_head_norm.weight", {W}, Init::Norm);
      add(p + "nextn.hc_head_down.weight", {W, R}, Init::Matrix);
      add(p + "nextn.hc_head_up.weight", {R, W}, Init::Matrix);
    }
  }

  gguf::Writer& writer() { return w_; }
  Status write(const std::string& path) {
    if (!failed_.ok()) return failed_;
    return w_.write(path);
  }

 private:
  TinySpec s_;
  std::mt19937_64 rng_;
  gguf::Writer w_;
  Status status_, failed_;
};

inline Status write_tiny_model(const TinySpec& s, const std::string& path) {
  TinyWriter w(s);
  w.add_all();
  return w.write(path);
}

inline std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/strata_" + std::to_string(::getpid()) + "_" + name;
}

}  // namespace strata::testing
