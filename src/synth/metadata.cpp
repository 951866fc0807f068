// The GGUF keys of a synthetic pack: gguf-layout.md §2 at the released values, with the
// counts a slice changes (block_count, expert_count, compress_ratios, ple.layers), a small
// byte-level tokenizer so text commands work, and provenance keys that say it is synthetic.
// Also the exact header size of a file, so the plan knows every shard's size before writing.
#include <variant>

#include <fmt/format.h>

#include "internal.h"

namespace strata::synth::detail {
namespace {

bool is_prime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t d = 2; d * d <= n; ++d) {
    if (n % d == 0) return false;
  }
  return true;
}

PleConstants compute_ple_constants() {
  // spec/model.md §5.1: head h's modulus is the (h+1)-th prime >= ngram_vocab_size_base (PLE
  // layer index 0), offsets are the running sums, the table is padded to a multiple of 128;
  // the multipliers come from SplitMix64 of the seed. Appendix A lists the results.
  PleConstants c;
  uint64_t p = kNgramVocabBase - 1;
  uint64_t sum = 0;
  for (uint32_t h = 0; h < kPleHeads; ++h) {
    do ++p; while (!is_prime(p));
    c.head_offsets.push_back(sum);
    c.head_sizes.push_back(p);
    sum += p;
  }
  c.table_rows = (sum + kNgramDivisible - 1) / kNgramDivisible * kNgramDivisible;
  const uint64_t m_max = 0x7FFFFFFFFFFFFFFFull / static_cast<uint64_t>(kVocab);
  const uint64_t half = m_max / 2 > 0 ? m_max / 2 : 1;
  const uint64_t base = kNgramSeed;  // + 10007 * ple_layer_index (0)
  for (uint64_t i = 0; i < kNgramSize; ++i) {
    c.multipliers.push_back(2 * (splitmix64(base + 0x9E3779B97F4A7C15ull * (i + 1)) % half) + 1);
  }
  return c;
}

// GPT-2's byte-to-unicode map: byte b is written as this code point, so a byte-level BPE
// with no merges tokenizes any text into the 256 byte tokens and decodes it back exactly.
uint32_t byte_code_point(uint32_t b) {
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  if (printable) return b;
  uint32_t n = 0;
  for (uint32_t x = 0; x < b; ++x) {
    const bool p = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
    if (!p) ++n;
  }
  return 256 + n;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// The Qwen3.5-family special ids (gguf-layout.md §6) keep their places, so stop tokens, the
// PLE reset token and the chat markers are where a loader expects them. Ids 256..248043 are
// unreachable placeholders (no merges produce them); ids past 248076 are padding, as in the
// real vocabulary.
void add_tokenizer(gguf::Metadata& md) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  tokens.reserve(kVocab);
  types.reserve(kVocab);
  const std::pair<uint32_t, const char*> specials[] = {
      {248044, "<|endoftext|>"}, {248045, "<|im_start|>"}, {248046, "<|im_end|>"}, {248053, "<|vision_start|>"},
      {248054, "<|vision_end|>"}, {248055, "<|vision_pad|>"}, {248056, "<|image_pad|>"}, {248057, "<|video_pad|>"},
      {248058, "<tool_call>"}, {248059, "</tool_call>"}, {248066, "<tool_response>"}, {248067, "</tool_response>"},
      {248068, "<think>"}, {248069, "</think>"},
  };
  for (uint32_t id = 0; id < kVocab; ++id) {
    if (id < 256) {
      tokens.push_back(utf8(byte_code_point(id)));
      types.push_back(1);  // normal
    } else if (id < kEosToken) {
      tokens.push_back(fmt::format("<|synth_{}|>", id));
      types.push_back(1);
    } else if (id <= 248076) {
      std::string name = fmt::format("<|reserved_{}|>", id);
      for (const auto& [sid, sname] : specials) {
        if (sid == id) name = sname;
      }
      tokens.push_back(std::move(name));
      types.push_back(3);  // control
    } else {
      tokens.push_back(fmt::format("[PAD{}]", id));
      types.push_back(5);  // unused
    }
  }
  md.set("tokenizer.ggml.model", "gpt2");
  md.set("tokenizer.ggml.pre", "qwen35");
  md.set("tokenizer.ggml.tokens", gguf::Value::array(tokens));
  md.set("tokenizer.ggml.token_type", gguf::Value::array(types));
  md.set("tokenizer.ggml.merges", gguf::Value::array(std::vector<std::string>{}));
  md.set("tokenizer.ggml.bos_token_id", uint32_t{248044});
  md.set("tokenizer.ggml.eos_token_id", uint32_t{248046});
  md.set("tokenizer.ggml.padding_token_id", uint32_t{248055});
  md.set("tokenizer.ggml.add_bos_token", false);
  md.set("tokenizer.chat_template",
         "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
}

uint32_t llama_file_type(Recipe r) {
  switch (r) {
    case Recipe::Q2_0: return 41;      // LLAMA_FTYPE_MOSTLY_Q2_0
    case Recipe::IQ2_XS: return 20;    // LLAMA_FTYPE_MOSTLY_IQ2_XS
    case Recipe::IQ3_XXS: return 23;
    case Recipe::IQ3_S: return 26;
    case Recipe::UD_Q4_K_XL: return 15;  // unsloth's UD files report Q4_K_M
  }
  return 0;
}

uint64_t value_bytes(const gguf::Value& v) {
  return std::visit(
      [](const auto& x) -> uint64_t {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return 8 + x.size();
        } else if constexpr (std::is_same_v<T, gguf::Array>) {
          uint64_t n = 12;
          for (const gguf::Value& item : x.items) n += value_bytes(item);
          return n;
        } else if constexpr (std::is_same_v<T, bool>) {
          return 1;
        } else {
          return sizeof(T);
        }
      },
      v.storage());
}

}  // namespace

const PleConstants& ple_constants() {
  static const PleConstants c = compute_ple_constants();
  return c;
}

gguf::Metadata build_metadata(const Options& opt) {
  gguf::Metadata md;
  const uint32_t blocks = opt.layers + (opt.mtp ? 1 : 0);
  auto k = [&md](std::string_view key, gguf::Value v) { md.set("qwen4exp." + std::string(key), std::move(v)); };
  md.set("general.architecture", "qwen4exp");
  md.set("general.type", "model");
  md.set("general.name", fmt::format("Qwen3.8 Flash Next (synthetic {})", recipe_name(opt.recipe)));
  md.set("general.file_type", llama_file_type(opt.recipe));
  md.set("general.quantization_version", uint32_t{2});
  // Provenance: random weights must never pass for a real model in a bug report.
  md.set("strata.synth.recipe", std::string(recipe_name(opt.recipe)));
  md.set("strata.synth.seed", opt.seed);
  md.set("strata.synth.routing_skew", static_cast<float>(opt.routing_skew));

  k("block_count", blocks);
  if (opt.mtp) k("nextn_predict_layers", uint32_t{1});
  k("context_length", kContext);
  k("embedding_length", static_cast<uint32_t>(kHidden));
  k("attention.head_count", static_cast<uint32_t>(kHeads));
  k("attention.head_count_kv", static_cast<uint32_t>(kHeadsKv));
  k("attention.key_length", static_cast<uint32_t>(kHeadDim));
  k("attention.value_length", static_cast<uint32_t>(kHeadDim));
  k("attention.layer_norm_rms_epsilon", 1e-6f);
  k("rope.freq_base", 1e7f);
  k("rope.dimension_count", uint32_t{64});
  k("rope.dimension_sections", gguf::Value::array(std::vector<int32_t>{11, 11, 10, 0}));
  k("expert_count", opt.experts);
  k("expert_used_count", kTopK);
  k("expert_feed_forward_length", static_cast<uint32_t>(kFfExp));
  k("expert_shared_feed_forward_length", static_cast<uint32_t>(kFfShexp));
  k("ssm.conv_kernel", static_cast<uint32_t>(kConvKernel));
  k("ssm.state_size", static_cast<uint32_t>(kGdnHeadDim));
  k("ssm.group_count", static_cast<uint32_t>(kGdnKHeads));
  k("ssm.time_step_rank", static_cast<uint32_t>(kGdnVHeads));
  k("ssm.inner_size", static_cast<uint32_t>(kGdnInner));
  k("full_attention_interval", kAttnInterval);
  k("hyper_connection.count", static_cast<uint32_t>(kHcCount));
  k("hyper_connection.low_rank", static_cast<uint32_t>(kHcRank));
  k("attention.indexer.head_count", static_cast<uint32_t>(kIdxHeads));
  k("attention.indexer.key_length", static_cast<uint32_t>(kIdxHeadDim));
  k("attention.indexer.top_k", static_cast<uint32_t>(kIdxTopK));
  std::vector<int32_t> ratios;
  for (uint32_t l = 0; l < opt.layers; ++l) ratios.push_back(is_attention_block(l) ? kCompressRatio : 0);
  if (opt.mtp) ratios.push_back(0);  // the MTP block attends densely
  k("attention.compress_ratios", gguf::Value::array(ratios));

  // The PLE block is layer 1, so a 1-layer slice has no PLE (and no table).
  const bool ple = opt.layers > static_cast<uint32_t>(kPleLayer);
  k("ple.layers", gguf::Value::array(ple ? std::vector<int32_t>{kPleLayer} : std::vector<int32_t>{}));
  const PleConstants& c = ple_constants();
  k("ple.ngram_size", kNgramSize);
  k("ple.heads_per_ngram", kHeadsPerNgram);
  k("ple.conv_kernel", static_cast<uint32_t>(kConvKernel));
  k("ple.eos_token_id", kEosToken);
  k("ple.image_token_id", kImageToken);
  k("embedding_length_per_layer_input", static_cast<uint32_t>(kPleRowDim));
  k("ple.layer_multipliers", gguf::Value::array(c.multipliers));
  k("ple.head_offsets", gguf::Value::array(c.head_offsets));
  k("ple.head_vocab_sizes", gguf::Value::array(c.head_sizes));
  add_tokenizer(md);
  return md;
}

uint64_t gguf_header_bytes(const gguf::Metadata& md, const std::vector<const TensorPlan*>& tensors,
                           uint32_t n_split_keys_shard, bool with_metadata) {
  uint64_t n = 4 + 4 + 8 + 8;  // magic, version, tensor count, key count
  if (with_metadata) {
    for (const gguf::KeyValue& kv : md.entries()) n += 8 + kv.key.size() + 4 + value_bytes(kv.value);
  }
  if (n_split_keys_shard > 0) {  // split.no (u16), split.count (u16), split.tensors.count (i32)
    n += (8 + 8 + 4 + 2) + (8 + 11 + 4 + 2) + (8 + 19 + 4 + 4);
  }
  for (const TensorPlan* t : tensors) n += 8 + t->name.size() + 4 + 8 * t->ne.size() + 4 + 8;
  return (n + 31) / 32 * 32;
}

}  // namespace strata::synth::detail
