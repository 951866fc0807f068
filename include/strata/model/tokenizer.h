// Text to token ids and back: the byte-level BPE tokenizer of the Qwen3.5 family, as stored
// in the GGUF (tokenizer.ggml.model = "gpt2", tokenizer.ggml.pre = "qwen35";
// spec/gguf-layout.md §6).
//
// The pipeline is the one HF `tokenizers` runs for the published tokenizer.json, minus its
// NFC normalizer (the GGUF does not record it, and llama.cpp does not apply it either; text
// that is already NFC, which is nearly all text, tokenizes identically):
//
//   text -> special/added tokens matched first (leftmost, longest)
//        -> each remaining fragment split by the qwen35 pre-tokenizer (unicode_split.cpp)
//        -> each piece's bytes merged by BPE rank (lowest rank first, leftmost on ties)
//
// The core takes plain data (TokenizerData) so it can be built in tests without a file;
// tokenizer_data_from_gguf() reads that data from GGUF metadata.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"

namespace strata::gguf {
class Metadata;
}

namespace strata::model {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,       // text in GPT-2's byte alphabet; produced by BPE
  Unknown = 2,
  Control = 3,      // <|im_start|> and friends: matched in text only when parse_special
  UserDefined = 4,  // added tokens such as <think>: always matched in text, stored as raw text
  Unused = 5,       // padding rows up to the embedding size
  Byte = 6,
};

// Everything the tokenizer needs, as plain data. Field names follow the GGUF keys.
struct TokenizerData {
  std::string model = "gpt2";             // tokenizer.ggml.model
  std::string pre = "qwen35";             // tokenizer.ggml.pre
  std::vector<std::string> tokens;        // tokenizer.ggml.tokens
  std::vector<TokenType> token_types;     // tokenizer.ggml.token_type (empty: all Normal)
  std::vector<std::string> merges;        // tokenizer.ggml.merges, "left right", rank order
  TokenId bos_id = kNoToken;              // tokenizer.ggml.bos_token_id
  TokenId eos_id = kNoToken;              // tokenizer.ggml.eos_token_id
  TokenId pad_id = kNoToken;              // tokenizer.ggml.padding_token_id
  bool add_bos = false;                   // tokenizer.ggml.add_bos_token
  bool add_eos = false;                   // tokenizer.ggml.add_eos_token
  std::string chat_template;              // tokenizer.chat_template
};

// Reads TokenizerData from GGUF metadata. Missing optional keys take the defaults above;
// a missing tokens array or a wrong type is an error naming the key.
Result<TokenizerData> tokenizer_data_from_gguf(const gguf::Metadata& metadata);

struct EncodeOptions {
  // Add bos/eos as the metadata asks (add_bos_token / add_eos_token).
  bool add_special = true;
  // Match Control tokens written in the text (<|im_start|>). Off for untrusted user text,
  // so that it cannot forge turn markers; UserDefined tokens (<think>) are always matched,
  // as in HF tokenizers and llama.cpp.
  bool parse_special = true;
};

class Tokenizer {
 public:
  // Validates the data: model "gpt2", a known pre-tokenizer, well-formed merges whose parts
  // and result are tokens, special ids in range, all 256 byte tokens present.
  static Result<Tokenizer> create(TokenizerData data);
  static Result<Tokenizer> from_gguf(const gguf::Metadata& metadata);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Thread-safe (const): the BPE word cache lives for one call.
  std::vector<TokenId> encode(std::string_view text, EncodeOptions options = {}) const;

  // The bytes of one token. Control tokens give their text only with render_special.
  std::string token_to_piece(TokenId id, bool render_special = true) const;
  // Concatenated pieces; may hold invalid UTF-8 if the ids end mid-character.
  std::string decode(const std::vector<TokenId>& ids, bool render_special = true) const;

  size_t vocab_size() const;
  TokenType token_type(TokenId id) const;
  const std::string& token_text(TokenId id) const;  // as stored in the GGUF
  TokenId find_token(std::string_view text) const;  // exact stored text; kNoToken if absent
  TokenId bos_id() const;
  TokenId eos_id() const;
  // End-of-generation: eos, <|endoftext|>, <|im_end|> and the FIM end tokens when present.
  bool is_eog(TokenId id) const;
  const TokenizerData& data() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streaming decode: feeds ids one at a time and emits text only once its UTF-8 sequences
// are complete, so a character split across tokens is never printed in halves. Bytes that
// can never become valid UTF-8 are emitted as they are (the stream stays byte-exact: the
// concatenation of all outputs plus flush() equals decode(ids)).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = true)
      : tokenizer_(&tokenizer), render_special_(render_special) {}
  std::string push(TokenId id);
  std::string flush();  // whatever is pending, complete or not

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;
};

// Length of the longest prefix of `bytes` that does not end inside an incomplete (but so
// far valid) UTF-8 sequence. Invalid bytes count as complete.
size_t utf8_complete_prefix(std::string_view bytes);

// The qwen35 pre-tokenizer on its own: the byte ranges [begin, end) of the pieces of `text`,
// in order, covering it entirely. Exposed for tests and the benchmark.
struct Span {
  size_t begin;
  size_t end;
};
void split_qwen35(std::string_view text, std::vector<Span>& out);
// The same, in bounded steps: appends at most max_pieces pieces starting at byte `from`
// (a piece boundary) and returns where it stopped, so long texts need no span array.
size_t split_qwen35_step(std::string_view text, size_t from, size_t max_pieces, std::vector<Span>& out);

}  // namespace strata::model
