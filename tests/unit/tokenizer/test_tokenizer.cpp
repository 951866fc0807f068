// Tokenizer core on a hand-made vocabulary: merge order, special tokens, bos/eos,
// decoding and streaming, validation, and the GGUF adapter. Equality with HF tokenizers on
// a trained vocabulary is the oracle suite's job (tests/oracle/test_tokenizer.py).
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "strata/gguf/gguf.h"
#include "strata/model/tokenizer.h"
#include "tiny_vocab.h"

namespace strata::model {
namespace {

using test::alphabet;
using test::TinyVocab;

Tokenizer make(const TinyVocab& v) {
  Result<Tokenizer> t = Tokenizer::create(v.data);
  EXPECT_TRUE(t.ok()) << t.error();
  return std::move(t).value();
}

TEST(Tokenizer, BytesWithoutMerges) {
  TinyVocab v;
  Tokenizer t = make(v);
  EXPECT_EQ(t.encode("ab"), (std::vector<TokenId>{'a', 'b'}));
  EXPECT_EQ(t.encode(""), std::vector<TokenId>{});
  EXPECT_EQ(t.decode(t.encode("h\xC3\xA9llo \xFF")), "h\xC3\xA9llo \xFF");
}

TEST(Tokenizer, MergesApplyLowestRankFirst) {
  TinyVocab v;
  TokenId bc = v.merge("b", "c");   // rank 0
  TokenId ab = v.merge("a", "b");   // rank 1: loses to bc in "abc"
  TokenId abc = v.merge("a", "bc"); // rank 2
  Tokenizer t = make(v);
  EXPECT_EQ(t.encode("abc"), std::vector<TokenId>{abc});
  EXPECT_EQ(t.encode("ab"), std::vector<TokenId>{ab});
  EXPECT_EQ(t.encode("bca"), (std::vector<TokenId>{bc, 'a'}));
}

TEST(Tokenizer, EqualPairsMergeLeftmostFirst) {
  // "aaa" with only (a, a): HF merges the leftmost pair, giving [aa, a], not [a, aa].
  TinyVocab v;
  TokenId aa = v.merge("a", "a");
  Tokenizer t = make(v);
  EXPECT_EQ(t.encode("aaa"), (std::vector<TokenId>{aa, 'a'}));
  EXPECT_EQ(t.encode("aaaa"), (std::vector<TokenId>{aa, aa}));
  TokenId aaaa = v.merge("aa", "aa");
  Tokenizer t2 = make(v);
  EXPECT_EQ(t2.encode("aaaaa"), (std::vector<TokenId>{aaaa, 'a'}));
}

TEST(Tokenizer, PiecesAreMergedSeparately) {
  TinyVocab v;
  TokenId sp_h = v.merge(" ", "h");
  TokenId oh = v.merge("o", " ");  // never applies: "o" and " h" are different pieces
  (void)oh;
  Tokenizer t = make(v);
  EXPECT_EQ(t.encode("o h"), (std::vector<TokenId>{'o', sp_h}));
}

TEST(Tokenizer, SpecialTokens) {
  TinyVocab v;
  TokenId im = v.add_token("<|im_start|>", TokenType::Control);
  TokenId think = v.add_token("<think>", TokenType::UserDefined);
  TokenId th = v.add_token("<th", TokenType::UserDefined);  // shorter, same start
  Tokenizer t = make(v);
  EXPECT_EQ(t.encode("<|im_start|>x"), (std::vector<TokenId>{im, 'x'}));
  EXPECT_EQ(t.encode("a<think>b"), (std::vector<TokenId>{'a', think, 'b'}));  // longest wins
  EXPECT_EQ(t.encode("<thx"), (std::vector<TokenId>{th, 'x'}));
  // Without parse_special, control tokens are plain text; user-defined ones still match.
  EncodeOptions plain;
  plain.parse_special = false;
  std::vector<TokenId> ids = t.encode("<|im_start|><think>", plain);
  EXPECT_EQ(ids.back(), think);
  EXPECT_EQ(ids.size(), std::string("<|im_start|>").size() + 1);
  EXPECT_EQ(t.decode(t.encode("<|im_start|>hi<think>")), "<|im_start|>hi<think>");
  EXPECT_EQ(t.decode(t.encode("<|im_start|>hi"), /*render_special=*/false), "hi");
}

TEST(Tokenizer, BosEosFromMetadata) {
  TinyVocab v;
  TokenId bos = v.add_token("<|endoftext|>", TokenType::Control);
  TokenId eos = v.add_token("<|im_end|>", TokenType::Control);
  v.data.bos_id = bos;
  v.data.eos_id = eos;
  v.data.add_bos = true;
  v.data.add_eos = true;
  Tokenizer t = make(v);
  EXPECT_EQ(t.encode("a"), (std::vector<TokenId>{bos, 'a', eos}));
  EncodeOptions none;
  none.add_special = false;
  EXPECT_EQ(t.encode("a", none), std::vector<TokenId>{'a'});
  EXPECT_TRUE(t.is_eog(eos));
  EXPECT_TRUE(t.is_eog(bos));  // <|endoftext|> ends generation in this family
  EXPECT_FALSE(t.is_eog('a'));
}

TEST(Tokenizer, RoundTripsRandomBytes) {
  TinyVocab v;
  v.merge("t", "h");
  v.merge("th", "e");
  v.merge(" ", "the");
  v.merge("\xE4", "\xBD");
  v.merge("\xE4\xBD", "\xA0");
  v.add_token("<|im_end|>", TokenType::Control);
  Tokenizer t = make(v);
  std::mt19937 rng(7);
  const std::string alphabet_pool[] = {"the", " ", "\n", "<|im_end|>", "\xE4\xBD\xA0", "\xFF", "9", "'s", "\xCC\x81"};
  for (int i = 0; i < 500; ++i) {
    std::string s;
    int n = rng() % 20;
    for (int k = 0; k < n; ++k) {
      if (rng() % 4 == 0) {
        s += static_cast<char>(rng() % 256);
      } else {
        s += alphabet_pool[rng() % std::size(alphabet_pool)];
      }
    }
    EXPECT_EQ(t.decode(t.encode(s)), s);
  }
}

TEST(Tokenizer, StreamDecoderHoldsPartialCharacters) {
  TinyVocab v;
  Tokenizer t = make(v);
  StreamDecoder d(t);
  // "é" (C3 A9) and "€" (E2 82 AC) arrive one byte token at a time.
  EXPECT_EQ(d.push('a'), "a");
  EXPECT_EQ(d.push(0xC3), "");
  EXPECT_EQ(d.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(d.push(0xE2), "");
  EXPECT_EQ(d.push(0x82), "");
  EXPECT_EQ(d.push(0xAC), "\xE2\x82\xAC");
  EXPECT_EQ(d.push(0xFF), "\xFF");  // never valid: emitted as is
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.flush(), "\xF0");
}

TEST(Tokenizer, RejectsBadData) {
  {
    TinyVocab v;
    v.data.pre = "qwen2";
    EXPECT_NE(Tokenizer::create(v.data).error().find("qwen35"), std::string::npos);
  }
  {
    TinyVocab v;
    v.data.model = "llama";
    EXPECT_FALSE(Tokenizer::create(v.data).ok());
  }
  {
    TinyVocab v;
    v.data.merges.push_back("a b");  // "ab" is not a token
    EXPECT_NE(Tokenizer::create(v.data).error().find("merges[0]"), std::string::npos);
  }
  {
    TinyVocab v;
    v.data.tokens[0x41] = "zz";  // byte 'A' loses its token
    EXPECT_NE(Tokenizer::create(v.data).error().find("0x41"), std::string::npos);
  }
  {
    TinyVocab v;
    v.data.eos_id = 100000;
    EXPECT_FALSE(Tokenizer::create(v.data).ok());
  }
}

TEST(Tokenizer, FromGgufMetadata) {
  TinyVocab v;
  TokenId ab = v.merge("a", "b");
  TokenId eot = v.add_token("<|endoftext|>", TokenType::Control);
  gguf::Metadata md("memory");
  md.set("tokenizer.ggml.model", "gpt2");
  md.set("tokenizer.ggml.pre", "qwen35");
  md.set("tokenizer.ggml.tokens", gguf::Value::array(v.data.tokens));
  std::vector<int32_t> types;
  for (TokenType ty : v.data.token_types) types.push_back(static_cast<int32_t>(ty));
  md.set("tokenizer.ggml.token_type", gguf::Value::array(types));
  md.set("tokenizer.ggml.merges", gguf::Value::array(v.data.merges));
  md.set("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(eot));
  md.set("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eot));
  md.set("tokenizer.ggml.add_bos_token", true);
  md.set("tokenizer.chat_template", "{{ messages }}");
  Result<Tokenizer> t = Tokenizer::from_gguf(md);
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t->encode("ab"), (std::vector<TokenId>{eot, ab}));
  EXPECT_EQ(t->data().chat_template, "{{ messages }}");

  md.set("tokenizer.ggml.pre", "llama-bpe");
  EXPECT_FALSE(Tokenizer::from_gguf(md).ok());
  md.erase("tokenizer.ggml.tokens");
  EXPECT_NE(Tokenizer::from_gguf(md).error().find("tokenizer.ggml.tokens"), std::string::npos);
}

}  // namespace
}  // namespace strata::model
