// bind_weights: one table says which tensors each kind of block has and what shape each must
// be; binding walks it, so adding a tensor is one row. Every tensor of the file must be
// claimed by a row (an unknown name is a converter bug: better refused than ignored).
#include "strata/model/weights.h"

#include <fmt/format.h>

#include <set>

#include "strata/quant/dequant.h"

namespace strata::model {

namespace {

using Shape = std::array<int64_t, 4>;

// Which blocks carry a tensor.
enum class Where : uint8_t {
  Every,      // every block (HC, MoE router and shared expert)
  Gdn,        // GDN blocks
  Attn,       // attention blocks (trunk and MTP)
  Indexer,    // trunk attention blocks with QSA; optional on the MTP block
  Ple,        // the PLE block
  Mtp,        // the MTP block
};
// Routed expert gate/up are not in the table: they come split or fused (bind_experts).

struct TensorRow {
  const char* suffix;                 // name after "blk.N."
  Tensor Block::*field;
  Where where;
  Shape (*shape)(const ModelConfig&, uint32_t block);
  bool small;                         // keep a dequantized fp32 copy (norms, conv, gates)
  bool wide_norm;                     // a [W] norm also accepted as [H, S] (same bytes)
};

Shape s1(int64_t a) { return {a, 1, 1, 1}; }
Shape s2(int64_t a, int64_t b) { return {a, b, 1, 1}; }
Shape s3(int64_t a, int64_t b, int64_t c) { return {a, b, c, 1}; }

#define SHAPE(expr) [](const ModelConfig& c, uint32_t b) -> Shape { (void)c; (void)b; return expr; }

const TensorRow kRows[] = {
    {"hc_attn_norm.weight", &Block::hc_attn_norm, Where::Every, SHAPE(s1(c.n_wide())), true, true},
    {"hc_attn_down.weight", &Block::hc_attn_down, Where::Every, SHAPE(s2(c.n_wide(), c.hc_rank)), false, false},
    {"hc_attn_up.weight", &Block::hc_attn_up, Where::Every, SHAPE(s2(c.hc_rank, c.n_wide())), false, false},
    {"hc_attn_inject.weight", &Block::hc_attn_inject, Where::Every, SHAPE(s2(c.n_wide(), c.hc_count)), false, false},
    {"hc_ffn_norm.weight", &Block::hc_ffn_norm, Where::Every, SHAPE(s1(c.n_wide())), true, true},
    {"hc_ffn_down.weight", &Block::hc_ffn_down, Where::Every, SHAPE(s2(c.n_wide(), c.hc_rank)), false, false},
    {"hc_ffn_up.weight", &Block::hc_ffn_up, Where::Every, SHAPE(s2(c.hc_rank, c.n_wide())), false, false},
    {"hc_ffn_inject.weight", &Block::hc_ffn_inject, Where::Every, SHAPE(s2(c.n_wide(), c.hc_count)), false, false},

    {"attn_qkv.weight", &Block::attn_qkv, Where::Gdn, SHAPE(s2(c.n_embd, c.ssm_conv_dim())), false, false},
    {"attn_gate.weight", &Block::attn_gate, Where::Gdn, SHAPE(s2(c.n_embd, c.ssm_inner)), false, false},
    {"ssm_conv1d.weight", &Block::ssm_conv1d, Where::Gdn, SHAPE(s2(c.ssm_conv_kernel, c.ssm_conv_dim())), true, false},
    {"ssm_dt.bias", &Block::ssm_dt_bias, Where::Gdn, SHAPE(s1(c.ssm_n_v_heads)), true, false},
    {"ssm_a", &Block::ssm_a, Where::Gdn, SHAPE(s1(c.ssm_n_v_heads)), true, false},
    {"ssm_alpha.weight", &Block::ssm_alpha, Where::Gdn, SHAPE(s2(c.n_embd, c.ssm_n_v_heads)), false, false},
    {"ssm_beta.weight", &Block::ssm_beta, Where::Gdn, SHAPE(s2(c.n_embd, c.ssm_n_v_heads)), false, false},
    {"ssm_norm.weight", &Block::ssm_norm, Where::Gdn, SHAPE(s1(c.ssm_head_dim)), true, false},
    {"ssm_out.weight", &Block::ssm_out, Where::Gdn, SHAPE(s2(c.ssm_inner, c.n_embd)), false, false},

    {"attn_q.weight", &Block::attn_q, Where::Attn, SHAPE(s2(c.n_embd, 2 * c.n_head * c.head_dim)), false, false},
    {"attn_k.weight", &Block::attn_k, Where::Attn, SHAPE(s2(c.n_embd, c.n_head_kv * c.head_dim)), false, false},
    {"attn_v.weight", &Block::attn_v, Where::Attn, SHAPE(s2(c.n_embd, c.n_head_kv * c.head_dim)), false, false},
    {"attn_output.weight", &Block::attn_output, Where::Attn, SHAPE(s2(c.n_head * c.head_dim, c.n_embd)), false, false},
    {"attn_q_norm.weight", &Block::attn_q_norm, Where::Attn, SHAPE(s1(c.head_dim)), true, false},
    {"attn_k_norm.weight", &Block::attn_k_norm, Where::Attn, SHAPE(s1(c.head_dim)), true, false},
    {"indexer.q_proj.weight", &Block::indexer_q_proj, Where::Indexer,
     SHAPE(s2(c.n_embd, c.indexer_n_head * c.indexer_head_dim)), false, false},
    {"indexer.k_proj.weight", &Block::indexer_k_proj, Where::Indexer, SHAPE(s2(c.n_embd, c.indexer_head_dim)), false, false},
    {"indexer.q_norm.weight", &Block::indexer_q_norm, Where::Indexer, SHAPE(s1(c.indexer_head_dim)), true, false},
    {"indexer.k_norm.weight", &Block::indexer_k_norm, Where::Indexer, SHAPE(s1(c.indexer_head_dim)), true, false},

    {"ffn_gate_inp.weight", &Block::ffn_gate_inp, Where::Every, SHAPE(s2(c.n_embd, c.n_expert)), false, false},
    {"ffn_down_exps.weight", &Block::ffn_down_exps, Where::Every, SHAPE(s3(c.n_ff_exp[b], c.n_embd, c.n_expert)), false, false},
    {"ffn_gate_shexp.weight", &Block::ffn_gate_shexp, Where::Every, SHAPE(s2(c.n_embd, c.n_ff_shexp)), false, false},
    {"ffn_up_shexp.weight", &Block::ffn_up_shexp, Where::Every, SHAPE(s2(c.n_embd, c.n_ff_shexp)), false, false},
    {"ffn_down_shexp.weight", &Block::ffn_down_shexp, Where::Every, SHAPE(s2(c.n_ff_shexp, c.n_embd)), false, false},
    {"ffn_gate_inp_shexp.weight", &Block::ffn_gate_inp_shexp, Where::Every, SHAPE(s1(c.n_embd)), true, false},

    {"ple_key.weight", &Block::ple_key, Where::Ple, SHAPE(s2(c.ple.embed_dim(), c.n_wide())), false, false},
    {"ple_value.weight", &Block::ple_value, Where::Ple, SHAPE(s2(c.ple.embed_dim(), c.n_embd)), false, false},
    {"ple_norm_key.weight", &Block::ple_norm_key, Where::Ple, SHAPE(s1(c.n_wide())), true, true},
    {"ple_norm_query.weight", &Block::ple_norm_query, Where::Ple, SHAPE(s1(c.n_wide())), true, true},
    {"ple_norm_conv.weight", &Block::ple_norm_conv, Where::Ple, SHAPE(s1(c.n_wide())), true, true},
    {"ple_conv1d.weight", &Block::ple_conv1d, Where::Ple, SHAPE(s2(c.ple.conv_kernel, c.n_wide())), true, false},

    {"nextn.eh_proj.weight", &Block::nextn_eh_proj, Where::Mtp, SHAPE(s2(2 * c.n_embd, c.n_embd)), false, false},
    {"nextn.enorm.weight", &Block::nextn_enorm, Where::Mtp, SHAPE(s1(c.n_embd)), true, false},
    {"nextn.hnorm.weight", &Block::nextn_hnorm, Where::Mtp, SHAPE(s1(c.n_wide())), true, true},
    {"nextn.hc_head_norm.weight", &Block::nextn_hc_head_norm, Where::Mtp, SHAPE(s1(c.n_wide())), true, true},
    {"nextn.hc_head_down.weight", &Block::nextn_hc_head_down, Where::Mtp, SHAPE(s2(c.n_wide(), c.hc_rank)), false, false},
    {"nextn.hc_head_up.weight", &Block::nextn_hc_head_up, Where::Mtp, SHAPE(s2(c.hc_rank, c.n_wide())), false, false},
};

#undef SHAPE

std::string shape_str(const Shape& s) {
  int n = 4;
  while (n > 1 && s[n - 1] == 1) --n;
  return fmt::format("[{}]", fmt::join(s.begin(), s.begin() + n, ","));
}

class Binder {
 public:
  Binder(const gguf::Model& file, const ModelConfig& config, Weights& w) : file_(file), c_(config), w_(w) {}

  Status error(std::string_view name, std::string_view want, std::string_view got) const {
    return Status::error(fmt::format("qwen4exp: expected {} {}, got {} in {}", name, want, got, c_.file));
  }

  // Binds `name` into `out`; absent tensors are an error unless optional.
  Status bind(const std::string& name, const Shape& want, bool small, bool wide_norm, bool optional, Tensor& out) {
    const gguf::TensorInfo* t = file_.find(name);
    if (!t) {
      if (optional) return Status::ok_status();
      return error(name, fmt::format("ne={}", shape_str(want)), "<missing>");
    }
    bound_.insert(name);
    const Shape got{t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    const bool reshaped_norm = wide_norm && got == Shape{c_.n_embd, c_.hc_count, 1, 1};
    if (got != want && !reshaped_norm) return error(name, fmt::format("ne={}", shape_str(want)), fmt::format("ne={}", shape_str(got)));
    if (!quant::has_dequantizer(t->type)) {
      const auto info = quant::type_info(t->type);
      return error(name, "a type with a dequantizer", info ? std::string(info->name) : fmt::format("type {}", uint32_t(t->type)));
    }
    out.name = &t->name;
    out.type = t->type;
    out.ne = reshaped_norm ? want : got;
    out.data = t->data;
    out.row_bytes = t->nbytes / static_cast<uint64_t>(out.rows());
    if (t->type == quant::Type::F32) {
      out.f32 = reinterpret_cast<const float*>(t->data);
    } else if (small) {
      auto copy = std::make_unique<std::vector<float>>(out.n_elements());
      STRATA_TRY(quant::dequantize_row(t->type, t->data, copy->data(), out.n_elements()));
      out.f32 = copy->data();
      w_.owned_f32.push_back(std::move(copy));
    }
    return Status::ok_status();
  }

  Status bind_block(uint32_t i) {
    const BlockPlan& plan = c_.plan.blocks[i];
    Block& blk = w_.blocks[i];
    blk.n_ff_exp = c_.n_ff_exp[i];
    for (const TensorRow& row : kRows) {
      bool applies = false, optional = false;
      switch (row.where) {
        case Where::Every: applies = true; break;
        case Where::Gdn: applies = plan.mixer == Mixer::Gdn; break;
        case Where::Attn: applies = plan.mixer == Mixer::Attention; break;
        case Where::Indexer:
          applies = plan.mixer == Mixer::Attention && c_.qsa && (plan.mtp || plan.compress_ratio > 0);
          optional = plan.mtp;
          break;
        case Where::Ple: applies = plan.ple; break;
        case Where::Mtp: applies = plan.mtp; break;
      }
      if (!applies) continue;
      STRATA_TRY(bind(fmt::format("blk.{}.{}", i, row.suffix), row.shape(c_, i), row.small, row.wide_norm, optional,
                      blk.*row.field));
    }
    if (plan.mtp && c_.qsa) {
      // The MTP indexer is all or nothing: a half-bound indexer is a converter bug.
      const bool any = blk.indexer_q_proj || blk.indexer_k_proj || blk.indexer_q_norm || blk.indexer_k_norm;
      const bool all = blk.indexer_q_proj && blk.indexer_k_proj && blk.indexer_q_norm && blk.indexer_k_norm;
      if (any && !all) return error(fmt::format("blk.{}.indexer.*", i), "all four tensors", "some");
    }
    return bind_experts(i, blk);
  }

  // Routed expert gate/up: split (ffn_gate_exps + ffn_up_exps) or fused (ffn_gate_up_exps).
  Status bind_experts(uint32_t i, Block& blk) {
    const int64_t ff = blk.n_ff_exp;
    const std::string fused = fmt::format("blk.{}.ffn_gate_up_exps.weight", i);
    if (file_.find(fused)) {
      for (const char* split : {"ffn_gate_exps", "ffn_up_exps"}) {
        const std::string name = fmt::format("blk.{}.{}.weight", i, split);
        if (file_.find(name)) return error(name, "absent (ffn_gate_up_exps is present)", "present");
      }
      return bind(fused, s3(c_.n_embd, 2 * ff, c_.n_expert), false, false, false, blk.ffn_gate_up_exps);
    }
    STRATA_TRY(bind(fmt::format("blk.{}.ffn_gate_exps.weight", i), s3(c_.n_embd, ff, c_.n_expert), false, false, false,
                    blk.ffn_gate_exps));
    return bind(fmt::format("blk.{}.ffn_up_exps.weight", i), s3(c_.n_embd, ff, c_.n_expert), false, false, false,
                blk.ffn_up_exps);
  }

  Status bind_globals(ModelConfig& config) {
    const gguf::TensorInfo* embd = file_.find("token_embd.weight");
    if (!embd) return error("token_embd.weight", fmt::format("ne=[{},<n_vocab>]", c_.n_embd), "<missing>");
    const int64_t n_vocab = embd->ne[1];
    if (config.n_vocab != 0 && n_vocab != config.n_vocab) {
      return error("token_embd.weight", fmt::format("ne=[{},{}] (qwen4exp.vocab_size)", c_.n_embd, config.n_vocab),
                   fmt::format("ne=[{},{}]", embd->ne[0], n_vocab));
    }
    if (n_vocab <= 0 || n_vocab > INT32_MAX) return error("token_embd.weight", "1 <= n_vocab < 2^31", std::to_string(n_vocab));
    config.n_vocab = static_cast<uint32_t>(n_vocab);
    STRATA_TRY(bind("token_embd.weight", s2(c_.n_embd, n_vocab), false, false, false, w_.token_embd));
    STRATA_TRY(bind("output.weight", s2(c_.n_embd, n_vocab), false, false, true, w_.output));
    if (!w_.output) w_.output = w_.token_embd;  // llama.cpp's fallback for a tied head
    STRATA_TRY(bind("output_hc_norm.weight", s1(c_.n_wide()), true, true, false, w_.output_hc_norm));
    STRATA_TRY(bind("output_hc_down.weight", s2(c_.n_wide(), c_.hc_rank), false, false, false, w_.output_hc_down));
    STRATA_TRY(bind("output_hc_up.weight", s2(c_.hc_rank, c_.n_wide()), false, false, false, w_.output_hc_up));
    if (c_.has_ple) STRATA_TRY(bind_ple_table());
    return Status::ok_status();
  }

  // The n-gram table: every head's rows [offset, offset + size) must lie inside it.
  Status bind_ple_table() {
    const char* name = "per_layer_token_embd.weight";
    const gguf::TensorInfo* t = file_.find(name);
    uint64_t need = 0;
    for (size_t h = 0; h < c_.ple.head_sizes.size(); ++h) {
      need = std::max(need, c_.ple.head_offsets[h] + c_.ple.head_sizes[h]);
    }
    if (!t) return error(name, fmt::format("ne=[{},>={}]", c_.ple.row_dim, need), "<missing>");
    if (t->ne[1] < static_cast<int64_t>(need)) {
      return error(name, fmt::format("ne=[{},>={}] (ple.head_offsets + ple.head_vocab_sizes)", c_.ple.row_dim, need),
                   fmt::format("ne=[{},{}]", t->ne[0], t->ne[1]));
    }
    return bind(name, s2(c_.ple.row_dim, t->ne[1]), false, false, false, w_.per_layer_token_embd);
  }

  Status check_all_claimed() const {
    for (const gguf::TensorInfo& t : file_.tensors()) {
      if (!bound_.contains(t.name)) {
        return Status::error(fmt::format("qwen4exp: expected no tensor {} (not part of this model's layout), got one in {}",
                                         t.name, c_.file));
      }
    }
    return Status::ok_status();
  }

 private:
  const gguf::Model& file_;
  const ModelConfig& c_;
  Weights& w_;
  std::set<std::string, std::less<>> bound_;
};

}  // namespace

MatrixRows Block::expert_gate(int64_t e) const {
  if (ffn_gate_up_exps) return {&ffn_gate_up_exps, e * 2 * n_ff_exp, n_ff_exp};
  return {&ffn_gate_exps, e * n_ff_exp, n_ff_exp};
}

MatrixRows Block::expert_up(int64_t e) const {
  if (ffn_gate_up_exps) return {&ffn_gate_up_exps, e * 2 * n_ff_exp + n_ff_exp, n_ff_exp};
  return {&ffn_up_exps, e * n_ff_exp, n_ff_exp};
}

MatrixRows Block::expert_down(int64_t e) const {
  const int64_t h = ffn_down_exps.ne[1];
  return {&ffn_down_exps, e * h, h};
}

Result<Weights> bind_weights(const gguf::Model& file, ModelConfig& config) {
  Weights w;
  w.blocks.resize(config.plan.n_blocks);
  Binder binder(file, config, w);
  STRATA_TRY(binder.bind_globals(config));
  for (uint32_t i = 0; i < config.plan.n_blocks; ++i) STRATA_TRY(binder.bind_block(i));
  STRATA_TRY(binder.check_all_claimed());
  return w;
}

}  // namespace strata::model
