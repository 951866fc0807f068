// The adapter from GGUF metadata (include/strata/gguf/gguf.h) to TokenizerData. The
// tokenizer core never sees the container; this file is the only place that knows the
// tokenizer.* key names.
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "strata/gguf/gguf.h"
#include "strata/model/tokenizer.h"

namespace strata::model {
namespace {

Status read_token_id(const gguf::Metadata& md, std::string_view key, size_t n_tokens, TokenId& out) {
  if (!md.has(key)) return Status::ok_status();
  Result<uint64_t> v = md.get_uint(key);
  if (!v) return v.status();
  if (*v >= n_tokens) {
    return Status::error(fmt::format("tokenizer: {}: {} is out of range (expected < {}) in {}", key, *v,
                                     n_tokens, md.source()));
  }
  out = static_cast<TokenId>(*v);
  return Status::ok_status();
}

Status read_flag(const gguf::Metadata& md, std::string_view key, bool& out) {
  if (!md.has(key)) return Status::ok_status();
  Result<bool> v = md.get_bool(key);
  if (!v) return v.status();
  out = *v;
  return Status::ok_status();
}

}  // namespace

Result<TokenizerData> tokenizer_data_from_gguf(const gguf::Metadata& md) {
  TokenizerData d;
  Result<std::string> model = md.get_string("tokenizer.ggml.model");
  if (!model) return model.status();
  d.model = *model;
  // llama.cpp falls back to its "default" splitter when the key is missing; that is not
  // this family's, so the name is kept empty and Tokenizer::create refuses it.
  d.pre.clear();
  if (md.has("tokenizer.ggml.pre")) {
    Result<std::string> pre = md.get_string("tokenizer.ggml.pre");
    if (!pre) return pre.status();
    d.pre = *pre;
  }
  Result<std::vector<std::string>> tokens = md.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return tokens.status();
  d.tokens = std::move(*tokens);
  if (md.has("tokenizer.ggml.token_type")) {
    Result<std::vector<int64_t>> types = md.get_int_array("tokenizer.ggml.token_type");
    if (!types) return types.status();
    d.token_types.reserve(types->size());
    for (size_t i = 0; i < types->size(); ++i) {
      int64_t t = (*types)[i];
      if (t < 0 || t > static_cast<int64_t>(TokenType::Byte)) {
        return Status::error(fmt::format("tokenizer: tokenizer.ggml.token_type[{}]: {} is not a token type (0..6) in {}",
                                         i, t, md.source()));
      }
      d.token_types.push_back(static_cast<TokenType>(t));
    }
  }
  if (md.has("tokenizer.ggml.merges")) {
    Result<std::vector<std::string>> merges = md.get_string_array("tokenizer.ggml.merges");
    if (!merges) return merges.status();
    d.merges = std::move(*merges);
  }
  STRATA_TRY(read_token_id(md, "tokenizer.ggml.bos_token_id", d.tokens.size(), d.bos_id));
  STRATA_TRY(read_token_id(md, "tokenizer.ggml.eos_token_id", d.tokens.size(), d.eos_id));
  STRATA_TRY(read_token_id(md, "tokenizer.ggml.padding_token_id", d.tokens.size(), d.pad_id));
  STRATA_TRY(read_flag(md, "tokenizer.ggml.add_bos_token", d.add_bos));
  STRATA_TRY(read_flag(md, "tokenizer.ggml.add_eos_token", d.add_eos));
  if (md.has("tokenizer.chat_template")) {
    Result<std::string> tmpl = md.get_string("tokenizer.chat_template");
    if (!tmpl) return tmpl.status();
    d.chat_template = *tmpl;
  }
  return d;
}

Result<Tokenizer> Tokenizer::from_gguf(const gguf::Metadata& metadata) {
  Result<TokenizerData> data = tokenizer_data_from_gguf(metadata);
  if (!data) return data.status();
  return create(std::move(*data));
}

}  // namespace strata::model
