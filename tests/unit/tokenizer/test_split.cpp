// The qwen35 pre-tokenizer against pieces produced by HF tokenizers 0.23.3 (a Split with
// the Qwen3.5 regex, behavior "isolated") for the same strings, plus the UTF-8 helpers.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "strata/model/tokenizer.h"

namespace strata::model {
namespace {

std::vector<std::string> pieces(const std::string& text) {
  std::vector<Span> spans;
  split_qwen35(text, spans);
  std::vector<std::string> out;
  for (const Span& s : spans) out.push_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

struct SplitCase {
  const char* name;
  std::string text;
  std::vector<std::string> expected;
};

// Expected pieces were printed by HF tokenizers for each text (see the file comment).
const SplitCase kCases[] = {
    {"words", "Hello world", {"Hello", " world"}},
    {"contractions",
     "it's THEY'RE we'Ve I'M you'LL he'd '\xC5\xBF 'x",
     {"it", "'s", " THEY", "'RE", " we", "'Ve", " I", "'M", " you", "'LL", " he", "'d", " '", "\xC5\xBF", " '", "x"}},
    {"long_s_contraction", "a'\xC5\xBFt", {"a", "'\xC5\xBF", "t"}},
    {"spaces", "  leading  spaces   x  ", {" ", " leading", " ", " spaces", "  ", " x", "  "}},
    {"tabs_ideographic_space",
     "tabs\t\tand\xE3\x80\x80ideographic",
     {"tabs", "\t", "\tand", "\xE3\x80\x80ideographic"}},
    {"newline_runs", "a\n\nb\r\n\r\nc  \n  d", {"a", "\n\n", "b", "\r\n\r\n", "c", "  \n", " ", " d"}},
    {"code",
     "x = f(y) + 12345;\n\treturn -1.5e3",
     {"x", " =", " f", "(y", ")", " +", " ", "1", "2", "3", "4", "5", ";\n", "\treturn", " -", "1", ".", "5", "e", "3"}},
    {"punctuation_newlines", "!!!abc ...\n\n\nok", {"!!!", "abc", " ...\n\n\n", "ok"}},
    {"combining_marks",
     "na\xC3\xAFve cafe\xCC\x81 \xE0\xA4\x95\xE0\xA5\x8D\xE0\xA4\xB7",
     {"na\xC3\xAFve", " cafe\xCC\x81", " \xE0\xA4\x95\xE0\xA5\x8D\xE0\xA4\xB7"}},
    {"cjk",
     "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81\xE4\xBB\x8A\xE5\xA4\xA9\xE6\x98\xAF"
     "2026\xE5\xB9\xB4",
     {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",
      "\xEF\xBC\x81\xE4\xBB\x8A\xE5\xA4\xA9\xE6\x98\xAF", "2", "0", "2", "6", "\xE5\xB9\xB4"}},
    {"arabic_digits",
     "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD9\xA1\xD9\xA2",
     {"\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7", " ", "\xD9\xA1", "\xD9\xA2"}},
    {"emoji_zwj",
     "family \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 ok",
     {"family", " \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9", " ok"}},
    {"trailing_spaces", "end with spaces   ", {"end", " with", " spaces", "   "}},
    {"leading_marks", "\xCC\x81\xCC\x81" "a", {"\xCC\x81\xCC\x81" "a"}},
    {"space_mark", " \xCC\x81", {" \xCC\x81"}},
    {"nbsp", "\xC2\xA0\xC2\xA0x", {"\xC2\xA0", "\xC2\xA0x"}},
    {"nel_line_separator", "a\xC2\x85" "b\xE2\x80\xA8" "c", {"a", "\xC2\x85" "b", "\xE2\x80\xA8" "c"}},
    {"apostrophes", "'''s", {"'''", "s"}},
    {"symbols_digits", "$$ 100%", {"$$", " ", "1", "0", "0", "%"}},
    {"empty", "", {}},
};

TEST(SplitQwen35, MatchesHfTokenizers) {
  for (const SplitCase& c : kCases) {
    EXPECT_EQ(pieces(c.text), c.expected) << "case " << c.name;
  }
}

TEST(SplitQwen35, InvalidBytesAreSymbolsAndKept) {
  // 0xFF and a truncated 3-byte sequence are each a U+FFFD-like symbol, one unit per byte,
  // so they join punctuation runs and can prefix a word; no byte is lost.
  EXPECT_EQ(pieces("a\xFF" "b"), (std::vector<std::string>{"a", "\xFF" "b"}));
  EXPECT_EQ(pieces("x \xE2\x82!"), (std::vector<std::string>{"x", " \xE2\x82!"}));
  EXPECT_EQ(pieces("\xED\xA0\x80"), (std::vector<std::string>{"\xED\xA0\x80"}));  // encoded surrogate
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string joined;
  for (const std::string& p : pieces(all)) joined += p;
  EXPECT_EQ(joined, all);
}

TEST(Utf8, CompletePrefix) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xE2\x82"), 1u);           // unfinished euro sign
  EXPECT_EQ(utf8_complete_prefix("a\xE2\x82\xAC"), 4u);       // finished
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x91"), 0u);        // unfinished emoji
  EXPECT_EQ(utf8_complete_prefix("a\xE0\x80"), 3u);           // overlong: never valid
  EXPECT_EQ(utf8_complete_prefix("a\xED\xA0"), 3u);           // surrogate: never valid
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);               // not a lead byte
  EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);
  EXPECT_EQ(utf8_complete_prefix("\xF4\x90"), 2u);            // past U+10FFFF
}

}  // namespace
}  // namespace strata::model
