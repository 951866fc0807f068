// load_config: reads every qwen4exp key of spec/gguf-layout.md §2 with its exact type and
// checks the values against each other. The messages all read
// "qwen4exp: expected <key>=<what>, got <what was found> in <file>", where a missing key is
// "got <missing>" and a wrong type is "got <type>".
#include "strata/model/config.h"

#include <fmt/format.h>

#include <optional>

namespace strata::model {

namespace {

constexpr std::string_view kArch = "qwen4exp";

// Typed access to one file's metadata, producing the qwen4exp error form.
class KeyReader {
 public:
  KeyReader(const gguf::Metadata& md, const std::string& file) : md_(md), file_(file) {}

  Status error(std::string_view key, std::string_view want, std::string_view got) const {
    return Status::error(fmt::format("qwen4exp: expected {}={}, got {} in {}", full(key), want, got, file_));
  }
  static std::string full(std::string_view key) {
    return key.starts_with("general.") ? std::string(key) : fmt::format("{}.{}", kArch, key);
  }
  const gguf::Value* find(std::string_view key) const { return md_.find(full(key)); }
  static std::string type_str(const gguf::Value& v) {
    if (v.is<gguf::Array>()) return fmt::format("<arr[{}]>", gguf::value_type_name(v.as<gguf::Array>().elem_type));
    return fmt::format("<{}>", gguf::value_type_name(v.type()));
  }

  Result<uint32_t> u32(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return error(key, "<u32>", "<missing>");
    if (!v->is<uint32_t>()) return error(key, "<u32>", type_str(*v));
    return v->as<uint32_t>();
  }
  Result<uint32_t> u32_or(std::string_view key, uint32_t fallback) const {
    return find(key) ? u32(key) : Result<uint32_t>(fallback);
  }
  Result<float> f32(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return error(key, "<f32>", "<missing>");
    if (!v->is<float>()) return error(key, "<f32>", type_str(*v));
    return v->as<float>();
  }
  Result<std::string> str(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return error(key, "<str>", "<missing>");
    if (!v->is<std::string>()) return error(key, "<str>", type_str(*v));
    return v->as<std::string>();
  }
  // A flat array of any integer type; u64 values above INT64_MAX are rejected.
  Result<std::vector<int64_t>> int_array(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return error(key, "<integer array>", "<missing>");
    if (!v->is<gguf::Array>()) return error(key, "<integer array>", type_str(*v));
    std::vector<int64_t> out;
    for (const gguf::Value& item : v->as<gguf::Array>().items) {
      std::optional<int64_t> x = as_int(item);
      if (!x) return error(key, "<integer array>", type_str(*v));
      out.push_back(*x);
    }
    return out;
  }
  // The PLE hash arrays: 64-bit integers (u64 as llama.cpp writes them, or i64), never floats
  // — a float array would already have rounded the ~45-bit multipliers.
  Result<std::vector<uint64_t>> u64_array(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return error(key, "<arr[u64]>", "<missing>");
    if (!v->is<gguf::Array>()) return error(key, "<arr[u64]>", type_str(*v));
    const gguf::Array& a = v->as<gguf::Array>();
    std::vector<uint64_t> out;
    for (const gguf::Value& item : a.items) {
      if (item.is<uint64_t>()) out.push_back(item.as<uint64_t>());
      else if (item.is<int64_t>() && item.as<int64_t>() >= 0) out.push_back(static_cast<uint64_t>(item.as<int64_t>()));
      else return error(key, "<arr[u64]>", type_str(*v));
    }
    return out;
  }

 private:
  static std::optional<int64_t> as_int(const gguf::Value& v) {
    switch (v.type()) {
      case gguf::ValueType::U8: return v.as<uint8_t>();
      case gguf::ValueType::I8: return v.as<int8_t>();
      case gguf::ValueType::U16: return v.as<uint16_t>();
      case gguf::ValueType::I16: return v.as<int16_t>();
      case gguf::ValueType::U32: return v.as<uint32_t>();
      case gguf::ValueType::I32: return v.as<int32_t>();
      case gguf::ValueType::I64: return v.as<int64_t>();
      case gguf::ValueType::U64:
        if (v.as<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
        return static_cast<int64_t>(v.as<uint64_t>());
      default: return std::nullopt;
    }
  }

  const gguf::Metadata& md_;
  const std::string& file_;
};

#define CFG_READ(dst, expr)          \
  do {                               \
    auto r_ = (expr);                \
    if (!r_.ok()) return r_.status(); \
    dst = std::move(r_.value());     \
  } while (0)

Status read_attention(const KeyReader& k, ModelConfig& c) {
  CFG_READ(c.n_head, k.u32("attention.head_count"));
  CFG_READ(c.n_head_kv, k.u32("attention.head_count_kv"));
  CFG_READ(c.head_dim, k.u32("attention.key_length"));
  uint32_t value_length = 0;
  CFG_READ(value_length, k.u32("attention.value_length"));
  CFG_READ(c.rope_theta, k.f32("rope.freq_base"));
  CFG_READ(c.n_rot, k.u32("rope.dimension_count"));
  std::vector<int64_t> sections;
  CFG_READ(sections, k.int_array("rope.dimension_sections"));
  if (c.n_head == 0 || c.n_head_kv == 0 || c.n_head % c.n_head_kv != 0) {
    return k.error("attention.head_count", fmt::format("a positive multiple of head_count_kv ({})", c.n_head_kv),
                   std::to_string(c.n_head));
  }
  if (value_length != c.head_dim) {
    return k.error("attention.value_length", fmt::format("{} (key_length)", c.head_dim), std::to_string(value_length));
  }
  if (c.n_rot == 0 || c.n_rot % 2 != 0 || c.n_rot > c.head_dim) {
    return k.error("rope.dimension_count", fmt::format("an even value in [2, {}]", c.head_dim), std::to_string(c.n_rot));
  }
  if (!(c.rope_theta > 0.0f)) return k.error("rope.freq_base", "> 0", fmt::format("{}", c.rope_theta));
  if (sections.size() < 3 || sections.size() > 4) {
    return k.error("rope.dimension_sections", "3 or 4 entries", fmt::format("{} entries", sections.size()));
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] < 0) return k.error("rope.dimension_sections", "non-negative entries", fmt::format("[{}]", fmt::join(sections, ",")));
    c.rope_sections[i] = static_cast<int32_t>(sections[i]);
  }
  // Only plain rope is implemented; a user-edited YaRN context is refused rather than ignored.
  if (const gguf::Value* v = k.find("rope.scaling.type"); v && !(v->is<std::string>() && v->as<std::string>() == "none")) {
    return k.error("rope.scaling.type", "none (absent)", v->is<std::string>() ? v->as<std::string>() : KeyReader::type_str(*v));
  }
  return Status::ok_status();
}

Status read_indexer(const KeyReader& k, ModelConfig& c) {
  c.qsa = k.find("attention.indexer.head_count") != nullptr;
  if (!c.qsa) return Status::ok_status();
  CFG_READ(c.indexer_n_head, k.u32("attention.indexer.head_count"));
  CFG_READ(c.indexer_head_dim, k.u32("attention.indexer.key_length"));
  CFG_READ(c.indexer_top_k, k.u32("attention.indexer.top_k"));
  if (c.indexer_n_head == 0) return k.error("attention.indexer.head_count", "> 0", "0");
  if (c.indexer_head_dim < c.n_rot) {
    return k.error("attention.indexer.key_length", fmt::format(">= rope.dimension_count ({})", c.n_rot),
                   std::to_string(c.indexer_head_dim));
  }
  return Status::ok_status();
}

Status read_gdn(const KeyReader& k, ModelConfig& c) {
  CFG_READ(c.ssm_conv_kernel, k.u32("ssm.conv_kernel"));
  CFG_READ(c.ssm_head_dim, k.u32("ssm.state_size"));
  CFG_READ(c.ssm_n_k_heads, k.u32("ssm.group_count"));
  CFG_READ(c.ssm_n_v_heads, k.u32("ssm.time_step_rank"));
  CFG_READ(c.ssm_inner, k.u32("ssm.inner_size"));
  if (c.ssm_conv_kernel == 0) return k.error("ssm.conv_kernel", "> 0", "0");
  if (c.ssm_head_dim == 0) return k.error("ssm.state_size", "> 0", "0");
  if (c.ssm_n_k_heads == 0 || c.ssm_n_v_heads % c.ssm_n_k_heads != 0 || c.ssm_n_v_heads == 0) {
    return k.error("ssm.time_step_rank", fmt::format("a positive multiple of ssm.group_count ({})", c.ssm_n_k_heads),
                   std::to_string(c.ssm_n_v_heads));
  }
  if (c.ssm_inner != c.ssm_n_v_heads * c.ssm_head_dim) {
    return k.error("ssm.inner_size", fmt::format("{} (time_step_rank * state_size)", c.ssm_n_v_heads * c.ssm_head_dim),
                   std::to_string(c.ssm_inner));
  }
  return Status::ok_status();
}

Status read_moe(const KeyReader& k, ModelConfig& c, uint32_t n_blocks) {
  CFG_READ(c.n_expert, k.u32("expert_count"));
  CFG_READ(c.n_expert_used, k.u32("expert_used_count"));
  CFG_READ(c.n_ff_shexp, k.u32("expert_shared_feed_forward_length"));
  if (c.n_expert == 0) return k.error("expert_count", "> 0", "0");
  if (c.n_expert_used == 0 || c.n_expert_used > c.n_expert) {
    return k.error("expert_used_count", fmt::format("in [1, {}]", c.n_expert), std::to_string(c.n_expert_used));
  }
  if (c.n_ff_shexp == 0) return k.error("expert_shared_feed_forward_length", "> 0", "0");
  // A scalar (the usual form) or one width per block.
  const gguf::Value* v = k.find("expert_feed_forward_length");
  if (v && v->is<gguf::Array>()) {
    std::vector<int64_t> widths;
    CFG_READ(widths, k.int_array("expert_feed_forward_length"));
    if (widths.size() != n_blocks) {
      return k.error("expert_feed_forward_length", fmt::format("{} entries (block_count)", n_blocks),
                     fmt::format("{} entries", widths.size()));
    }
    for (int64_t w : widths) {
      if (w <= 0) return k.error("expert_feed_forward_length", "positive widths", fmt::format("[{}]", fmt::join(widths, ",")));
      c.n_ff_exp.push_back(static_cast<uint32_t>(w));
    }
  } else {
    uint32_t w = 0;
    CFG_READ(w, k.u32("expert_feed_forward_length"));
    if (w == 0) return k.error("expert_feed_forward_length", "> 0", "0");
    c.n_ff_exp.assign(n_blocks, w);
  }
  return Status::ok_status();
}

Status read_ple(const KeyReader& k, ModelConfig& c) {
  PleConfig& p = c.ple;
  CFG_READ(p.ngram_size, k.u32("ple.ngram_size"));
  CFG_READ(p.heads_per_ngram, k.u32("ple.heads_per_ngram"));
  CFG_READ(p.conv_kernel, k.u32("ple.conv_kernel"));
  CFG_READ(p.eos_token_id, k.u32("ple.eos_token_id"));
  CFG_READ(p.image_token_id, k.u32_or("ple.image_token_id", p.eos_token_id));
  CFG_READ(p.row_dim, k.u32("embedding_length_per_layer_input"));
  CFG_READ(p.multipliers, k.u64_array("ple.layer_multipliers"));
  CFG_READ(p.head_offsets, k.u64_array("ple.head_offsets"));
  CFG_READ(p.head_sizes, k.u64_array("ple.head_vocab_sizes"));
  if (p.ngram_size < 2) return k.error("ple.ngram_size", ">= 2", std::to_string(p.ngram_size));
  if (p.heads_per_ngram == 0) return k.error("ple.heads_per_ngram", "> 0", "0");
  if (p.conv_kernel == 0) return k.error("ple.conv_kernel", "> 0", "0");
  if (p.row_dim == 0) return k.error("embedding_length_per_layer_input", "> 0", "0");
  p.n_heads = (p.ngram_size - 1) * p.heads_per_ngram;
  if (p.multipliers.size() < p.ngram_size) {
    return k.error("ple.layer_multipliers", fmt::format(">= {} entries (ngram_size)", p.ngram_size),
                   fmt::format("{} entries", p.multipliers.size()));
  }
  for (const auto& [key, arr] : {std::pair{"ple.head_offsets", &p.head_offsets}, std::pair{"ple.head_vocab_sizes", &p.head_sizes}}) {
    if (arr->size() != p.n_heads) {
      return k.error(key, fmt::format("{} entries ((ngram_size - 1) * heads_per_ngram)", p.n_heads),
                     fmt::format("{} entries", arr->size()));
    }
  }
  for (uint64_t size : p.head_sizes) {
    // transformers hashes in int64: a modulus must be a positive int64.
    if (size == 0 || size > static_cast<uint64_t>(INT64_MAX)) {
      return k.error("ple.head_vocab_sizes", "moduli in [1, 2^63)", std::to_string(size));
    }
  }
  return Status::ok_status();
}

}  // namespace

Result<ModelConfig> load_config(const gguf::Metadata& md, const std::string& file) {
  const KeyReader k(md, file);
  ModelConfig c;
  c.file = file;

  std::string arch;
  CFG_READ(arch, k.str("general.architecture"));
  if (arch != kArch) return k.error("general.architecture", "qwen4exp", arch);

  LayerPlanInputs plan_in;
  plan_in.file = file;
  CFG_READ(plan_in.block_count, k.u32("block_count"));
  CFG_READ(plan_in.nextn_predict_layers, k.u32_or("nextn_predict_layers", 0));
  CFG_READ(plan_in.full_attention_interval, k.u32_or("full_attention_interval", 4));
  CFG_READ(c.context_length, k.u32("context_length"));
  CFG_READ(c.n_embd, k.u32("embedding_length"));
  CFG_READ(c.rms_eps, k.f32("attention.layer_norm_rms_epsilon"));
  CFG_READ(c.hc_count, k.u32("hyper_connection.count"));
  CFG_READ(c.hc_rank, k.u32("hyper_connection.low_rank"));
  if (plan_in.block_count == 0) return k.error("block_count", "> 0", "0");
  if (c.n_embd == 0) return k.error("embedding_length", "> 0", "0");
  if (!(c.rms_eps > 0.0f)) return k.error("attention.layer_norm_rms_epsilon", "> 0", fmt::format("{}", c.rms_eps));
  if (c.hc_count < 2) return k.error("hyper_connection.count", "> 1", std::to_string(c.hc_count));
  if (c.hc_rank == 0) return k.error("hyper_connection.low_rank", "> 0", "0");
  if (const gguf::Value* v = k.find("vocab_size")) {
    CFG_READ(c.n_vocab, k.u32("vocab_size"));
    (void)v;
  }

  STRATA_TRY(read_attention(k, c));
  STRATA_TRY(read_indexer(k, c));
  STRATA_TRY(read_gdn(k, c));
  STRATA_TRY(read_moe(k, c, plan_in.block_count));

  if (const gguf::Value* v = k.find("attention.recurrent_layers")) {
    std::vector<int64_t> flags;
    if (v->is<gguf::Array>() && v->as<gguf::Array>().elem_type == gguf::ValueType::Bool) {
      for (const gguf::Value& item : v->as<gguf::Array>().items) flags.push_back(item.as<bool>() ? 1 : 0);
    } else {
      CFG_READ(flags, k.int_array("attention.recurrent_layers"));
    }
    for (int64_t f : flags) plan_in.recurrent_layers.push_back(f != 0);
  }
  if (k.find("attention.compress_ratios")) CFG_READ(plan_in.compress_ratios, k.int_array("attention.compress_ratios"));
  plan_in.qsa = c.qsa;
  if (k.find("ple.layers")) CFG_READ(plan_in.ple_layers, k.int_array("ple.layers"));

  auto plan = build_layer_plan(plan_in);
  if (!plan) return plan.status();
  c.plan = std::move(plan.value());

  if (c.qsa) {
    for (const BlockPlan& b : c.plan.blocks) {
      if (!b.mtp && b.compress_ratio != 0) c.compress_ratio = b.compress_ratio;
    }
    if (c.compress_ratio != 0 && c.indexer_top_k % c.compress_ratio != 0) {
      return k.error("attention.indexer.top_k", fmt::format("a multiple of the compress ratio ({})", c.compress_ratio),
                     std::to_string(c.indexer_top_k));
    }
  }
  c.has_ple = c.plan.has_ple();
  if (c.has_ple) STRATA_TRY(read_ple(k, c));
  return c;
}

}  // namespace strata::model
