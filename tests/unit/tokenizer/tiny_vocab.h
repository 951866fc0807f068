// A hand-made byte-level vocabulary for the tokenizer unit tests: the 256 byte tokens in
// GPT-2's alphabet, merges added by raw text, and special tokens. The oracle tests
// (tests/oracle/test_tokenizer.py) cover a trained vocabulary against HF tokenizers.
#pragma once

#include <string>
#include <string_view>

#include "strata/model/tokenizer.h"

namespace strata::model::test {

// Raw bytes -> GPT-2 alphabet text (printable Latin-1 bytes as themselves, the rest shifted
// to U+0100 onward, in byte order).
inline std::string alphabet(std::string_view raw) {
  std::string out;
  for (char ch : raw) {
    auto b = static_cast<unsigned char>(ch);
    unsigned cp = b;
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable) {
      unsigned n = 0;
      for (unsigned x = 0; x < b; ++x) {
        bool p = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
        if (!p) ++n;
      }
      cp = 0x100 + n;
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

class TinyVocab {
 public:
  TinyVocab() {
    for (int b = 0; b < 256; ++b) add_token(alphabet(std::string(1, static_cast<char>(b))), TokenType::Normal);
  }
  TokenId add_token(const std::string& text, TokenType type) {
    data.tokens.push_back(text);
    data.token_types.push_back(type);
    return static_cast<TokenId>(data.tokens.size() - 1);
  }
  // Adds the merge left+right (raw bytes); creates the merged token. Returns its id.
  TokenId merge(std::string_view left, std::string_view right) {
    std::string merged = alphabet(std::string(left) + std::string(right));
    TokenId id = find(merged);
    if (id == kNoToken) id = add_token(merged, TokenType::Normal);
    data.merges.push_back(alphabet(left) + " " + alphabet(right));
    return id;
  }
  TokenId find(const std::string& text) const {
    for (size_t i = 0; i < data.tokens.size(); ++i) {
      if (data.tokens[i] == text) return static_cast<TokenId>(i);
    }
    return kNoToken;
  }
  TokenId byte(unsigned char b) const { return find(alphabet(std::string(1, static_cast<char>(b)))); }

  TokenizerData data;
};

}  // namespace strata::model::test
