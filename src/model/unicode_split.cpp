// The qwen35 pre-tokenizer: splits text into the pieces that BPE then merges separately.
//
// It is the regex of the Qwen3.5 tokenizer.json (llama.cpp LLAMA_VOCAB_PRE_TYPE_QWEN35):
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)              1 contractions
//   | [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+          2 a word, with one leading non-letter
//   | \p{N}                                    3 one digit
//   | ' '?[^\s\p{L}\p{M}\p{N}]+[\r\n]*         4 a punctuation run and its newlines
//   | \s*[\r\n]+                               5 whitespace up to the last newline
//   | \s+(?!\S)                                6 whitespace, leaving one for the next word
//   | \s+                                      7 whitespace
//
// hand-compiled into one forward scan with the semantics of HF tokenizers' regex engine
// (Oniguruma, leftmost alternative wins, greedy with backtracking), so that no regex
// engine runs at tokenization time. What the engine would do, and this scan must match:
//   - (?i) folds case with Unicode simple folding: 'S and 'ſ (U+017F) are contractions.
//   - \s is the Unicode White_Space property (not Python's isspace: U+001C..1F are not).
//   - \p{L}, \p{M}, \p{N} are general categories, taken from ICU (its Unicode version
//     decides characters assigned after it; HF's Oniguruma may know newer ones).
//   - Invalid UTF-8 cannot reach HF at all; here each invalid byte is one unit classed as
//     U+FFFD (a symbol), and the bytes themselves stay in the piece, so BPE still sees them.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include <unicode/uchar.h>

#include "strata/model/tokenizer.h"

namespace strata::model {
namespace {

enum : uint8_t {
  kL = 1,    // \p{L}
  kM = 2,    // \p{M}
  kN = 4,    // \p{N}
  kWS = 8,   // \s
  kNL = 16,  // \r or \n
};

uint8_t classify_icu(UChar32 cp) {
  uint32_t mask = U_GET_GC_MASK(cp);
  uint8_t f = 0;
  if (mask & U_GC_L_MASK) f |= kL;
  if (mask & U_GC_M_MASK) f |= kM;
  if (mask & U_GC_N_MASK) f |= kN;
  if (u_isUWhiteSpace(cp)) f |= kWS;
  if (cp == '\r' || cp == '\n') f |= kNL;
  return f;
}

// The BMP is looked up in a table built once from ICU: the scan touches every character,
// and a table read is several times cheaper than ICU's trie walk plus the property call.
const std::array<uint8_t, 0x10000>& bmp_table() {
  static const auto table = [] {
    std::array<uint8_t, 0x10000> t{};
    for (UChar32 cp = 0; cp < 0x10000; ++cp) t[cp] = classify_icu(cp);
    return t;
  }();
  return table;
}

// One character (or one invalid byte) at a position.
struct Ch {
  uint32_t cp;   // 0xFFFD for an invalid byte
  uint8_t len;   // bytes, >= 1
  uint8_t flags;
};

// Strict UTF-8 (Unicode Table 3-7): overlongs, surrogates and values past U+10FFFF are
// invalid, and an invalid lead or truncated sequence consumes exactly one byte.
inline uint8_t decode_utf8(const uint8_t* p, const uint8_t* end, uint32_t& cp) {
  uint8_t b0 = p[0];
  if (b0 < 0x80) { cp = b0; return 1; }
  auto cont = [&](int i, uint8_t lo, uint8_t hi) {
    return p + i < end && p[i] >= lo && p[i] <= hi;
  };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (cont(1, 0x80, 0xBF)) { cp = ((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu); return 2; }
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    if (cont(1, lo, hi) && cont(2, 0x80, 0xBF)) {
      cp = ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
      return 3;
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (cont(1, lo, hi) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF)) {
      cp = ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
      return 4;
    }
  }
  cp = 0xFFFD;
  return 0;  // invalid: the caller consumes one byte
}

class Scanner {
 public:
  explicit Scanner(std::string_view text)
      : p_(reinterpret_cast<const uint8_t*>(text.data())), n_(text.size()), bmp_(bmp_table()) {}

  size_t size() const { return n_; }

  Ch at(size_t pos) const {
    uint8_t b = p_[pos];
    if (b < 0x80) return {b, 1, bmp_[b]};
    uint32_t cp;
    uint8_t len = decode_utf8(p_ + pos, p_ + n_, cp);
    if (len == 0) return {0xFFFD, 1, 0};  // U+FFFD is So: no class bit
    uint8_t f = cp < 0x10000 ? bmp_[cp] : classify_icu(static_cast<UChar32>(cp));
    return {cp, len, f};
  }

  // End of the run of characters starting at pos whose flags intersect `any`.
  size_t run_with(size_t pos, uint8_t any) const {
    while (pos < n_) {
      Ch c = at(pos);
      if (!(c.flags & any)) break;
      pos += c.len;
    }
    return pos;
  }
  size_t run_without(size_t pos, uint8_t none) const {
    while (pos < n_) {
      Ch c = at(pos);
      if (c.flags & none) break;
      pos += c.len;
    }
    return pos;
  }

  size_t match(size_t pos) const;

 private:
  size_t contraction(size_t pos) const;
  size_t whitespace(size_t pos) const;

  const uint8_t* p_;
  size_t n_;
  const std::array<uint8_t, 0x10000>& bmp_;
};

// Alternative 1 at an apostrophe: the end of the contraction, or 0.
size_t Scanner::contraction(size_t pos) const {
  size_t i = pos + 1;
  if (i >= n_) return 0;
  Ch c = at(i);
  uint32_t a = c.cp < 0x80 ? (c.cp | 0x20) : c.cp;  // ASCII lower case
  if (a == 's' || a == 't' || a == 'm' || a == 'd' || c.cp == 0x017F) return i + c.len;
  if (a != 'r' && a != 'v' && a != 'l') return 0;
  if (i + 1 >= n_) return 0;
  uint32_t b = p_[i + 1] | 0x20u;  // the second letter is ASCII in every pair
  if (p_[i + 1] >= 0x80) return 0;
  if ((a == 'r' || a == 'v') && b == 'e') return i + 2;
  if (a == 'l' && b == 'l') return i + 2;
  return 0;
}

// Alternatives 5-7 at a whitespace character.
size_t Scanner::whitespace(size_t pos) const {
  size_t end = pos, last_start = pos, after_last_newline = 0;
  while (end < n_) {
    Ch c = at(end);
    if (!(c.flags & kWS)) break;
    last_start = end;
    end += c.len;
    if (c.flags & kNL) after_last_newline = end;
  }
  if (after_last_newline) return after_last_newline;  // \s*[\r\n]+
  if (end == n_) return end;                          // \s+(?!\S) up to the end
  if (last_start > pos) return last_start;            // \s+(?!\S): all but the last
  return end;                                         // \s+: a single one before \S
}

size_t Scanner::match(size_t pos) const {
  Ch c = at(pos);
  if (c.cp == '\'') {
    if (size_t e = contraction(pos)) return e;
  }
  if (c.flags & (kL | kM)) return run_with(pos, kL | kM);
  size_t next = pos + c.len;
  if (!(c.flags & (kNL | kL | kN)) && next < n_ && (at(next).flags & (kL | kM))) {
    return run_with(next, kL | kM);
  }
  if (c.flags & kN) return next;
  size_t start = c.cp == ' ' ? next : pos;
  size_t punct_end = run_without(start, kWS | kL | kM | kN);
  if (punct_end > start) {
    while (punct_end < n_ && (p_[punct_end] == '\r' || p_[punct_end] == '\n')) ++punct_end;
    return punct_end;
  }
  return whitespace(pos);
}

}  // namespace

size_t split_qwen35_step(std::string_view text, size_t from, size_t max_pieces, std::vector<Span>& out) {
  Scanner scanner(text);
  size_t pos = from;
  for (size_t n = 0; n < max_pieces && pos < text.size(); ++n) {
    size_t end = scanner.match(pos);
    out.push_back({pos, end});
    pos = end;
  }
  return pos;
}

void split_qwen35(std::string_view text, std::vector<Span>& out) {
  out.clear();
  split_qwen35_step(text, 0, text.size(), out);
}

namespace {

// True when s[0, have) is the start of a valid UTF-8 sequence that needs more bytes.
bool unfinished_sequence(const uint8_t* s, size_t have) {
  uint8_t b0 = s[0], lo = 0x80, hi = 0xBF;
  size_t need;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return false;
  }
  if (have >= need) return false;
  for (size_t k = 1; k < have; ++k) {
    uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (s[k] < l || s[k] > h) return false;
  }
  return true;
}

}  // namespace

size_t utf8_complete_prefix(std::string_view bytes) {
  // Only the last three bytes can start an unfinished sequence.
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  for (size_t i = n > 3 ? n - 3 : 0; i < n; ++i) {
    if (unfinished_sequence(p + i, n - i)) return i;
  }
  return n;
}

}  // namespace strata::model
