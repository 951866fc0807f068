// The byte-level BPE tokenizer (see include/strata/model/tokenizer.h for the pipeline).
//
// Internally every token is kept as raw bytes: Normal tokens are stored in GPT-2's byte
// alphabet (each byte shown as a printable character) and are decoded once at load, so
// that encoding works on the text's own bytes and never re-encodes pieces. Control and
// UserDefined tokens are stored as raw text already (convert_hf_to_gguf writes them so).
#include "strata/model/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace strata::model {
namespace {

// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other 68 bytes
// are shifted to U+0100.. in byte order. Returns codepoint -> byte, -1 when not in it.
const std::array<int16_t, 0x144>& alphabet_to_byte() {
  static const auto table = [] {
    std::array<int16_t, 0x144> t;
    t.fill(-1);
    int next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[printable ? b : next++] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return table;
}

// Decodes a Normal token's stored text to bytes; false if a character is outside the
// alphabet (the token then keeps its raw text, as HF's ByteLevel decoder does).
bool alphabet_decode(std::string_view text, std::string& out) {
  const auto& table = alphabet_to_byte();
  out.clear();
  for (size_t i = 0; i < text.size();) {
    auto b = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (b < 0x80) {
      cp = b;
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((b & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;  // the alphabet ends at U+0143: all of it is one or two bytes
    }
    if (cp >= table.size() || table[cp] < 0) return false;
    out.push_back(static_cast<char>(table[cp]));
  }
  return true;
}

// (left, right) -> (rank, merged token), open addressing on a 64-bit key. The merge loop
// does one lookup per candidate pair, so this is the tokenizer's hottest table.
class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    TokenId result = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Entry{});
    shift_ = 64 - static_cast<int>(__builtin_ctzll(cap));
  }
  // Keeps the first (lowest-rank) entry for a pair.
  void insert(TokenId left, TokenId right, int32_t rank, TokenId result) {
    uint64_t key = make_key(left, right);
    for (size_t i = slot(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return;
      if (slots_[i].key == kEmpty) {
        slots_[i] = {key, rank, result};
        return;
      }
    }
  }
  const Entry* find(TokenId left, TokenId right) const {
    uint64_t key = make_key(left, right);
    for (size_t i = slot(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return &slots_[i];
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static uint64_t make_key(TokenId l, TokenId r) {
    return (uint64_t{static_cast<uint32_t>(l)} << 32) | static_cast<uint32_t>(r);
  }
  size_t slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  std::vector<Entry> slots_;
  int shift_ = 60;
};

constexpr const char* kEogTexts[] = {"<|endoftext|>", "<|im_end|>", "<|fim_pad|>",
                                     "<|repo_name|>", "<|file_sep|>"};

// One pending merge in the BPE heap. Ordered as HF tokenizers orders it: lowest rank
// first, then leftmost, which fixes the result when equal pairs overlap ("aaa").
struct Candidate {
  int32_t rank;
  int32_t pos;
  TokenId result;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

struct Symbol {
  TokenId id;
  int32_t prev;
  int32_t next;
  bool alive;
};

// Longest pieces worth caching: long ones (runs of spaces, CJK sentences) rarely repeat.
constexpr size_t kMaxCachedPiece = 48;
// Bounds the per-call cache on huge prompts; beyond it pieces are merged uncached.
constexpr size_t kMaxCacheEntries = 1 << 18;
// Pieces split ahead of merging: enough to amortise the call, small enough to stay in L1.
constexpr size_t kSplitBatch = 1024;

uint64_t hash_piece(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  return h;
}

// Piece -> token ids for one encode call, open addressing. A slot holds the piece's first
// 16 bytes and up to 3 ids inline, so a hit on a common word touches one cache line: the
// text a node-based map would point into is megabytes away and missed the cache on every
// lookup (that map was 40% of the profile).
class PieceCache {
 public:
  PieceCache() { slots_.resize(1 << 12); }

  // Appends the cached ids of a piece to out; false if the piece is not cached.
  bool find(std::string_view piece, uint64_t h, std::vector<TokenId>& out) const {
    uint64_t k0, k1;
    head(piece, k0, k1);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.len == 0) return false;
      if (s.hash != h || s.len != piece.size() || s.k0 != k0 || s.k1 != k1) continue;
      if (piece.size() > 16 && std::memcmp(tails_.data() + s.tail, piece.data() + 16, piece.size() - 16) != 0) continue;
      if (s.count <= kInline) {
        out.insert(out.end(), s.inline_ids, s.inline_ids + s.count);
      } else {
        out.insert(out.end(), ids_.begin() + s.ids, ids_.begin() + s.ids + s.count);
      }
      return true;
    }
  }

  void insert(std::string_view piece, uint64_t h, const TokenId* ids, size_t n) {
    // Pieces are at most kMaxCachedPiece bytes, so they and their ids fit the 8-bit fields.
    if (used_ >= kMaxCacheEntries || piece.size() > 255 || n > 255) return;
    if ((used_ + 1) * 2 > slots_.size()) grow();
    Slot s;
    s.hash = h;
    head(piece, s.k0, s.k1);
    s.len = static_cast<uint8_t>(piece.size());
    s.count = static_cast<uint8_t>(n);
    if (piece.size() > 16) {
      s.tail = static_cast<uint32_t>(tails_.size());
      tails_.append(piece.substr(16));
    }
    if (n <= kInline) {
      std::copy(ids, ids + n, s.inline_ids);
    } else {
      s.ids = static_cast<uint32_t>(ids_.size());
      ids_.insert(ids_.end(), ids, ids + n);
    }
    place(s);
    ++used_;
  }

 private:
  static constexpr size_t kInline = 3;
  struct Slot {
    uint64_t hash = 0;
    uint64_t k0 = 0, k1 = 0;  // the piece's first 16 bytes, zero padded
    uint32_t tail = 0;        // bytes 16.. in tails_
    uint32_t ids = 0;         // in ids_ when count > kInline
    TokenId inline_ids[kInline] = {};
    uint8_t len = 0;          // 0: empty slot (pieces are never empty)
    uint8_t count = 0;
  };
  static void head(std::string_view piece, uint64_t& k0, uint64_t& k1) {
    char buf[16] = {};
    std::memcpy(buf, piece.data(), std::min<size_t>(piece.size(), 16));
    std::memcpy(&k0, buf, 8);
    std::memcpy(&k1, buf + 8, 8);
  }
  void place(const Slot& s) {
    size_t mask = slots_.size() - 1;
    size_t i = s.hash & mask;
    while (slots_[i].len) i = (i + 1) & mask;
    slots_[i] = s;
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.len) place(s);
    }
  }
  std::vector<Slot> slots_;
  std::vector<TokenId> ids_;
  std::string tails_;
  size_t used_ = 0;
};

// Scratch reused across the pieces of one encode call.
struct Work {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::vector<Span> spans;
  PieceCache cache;
};

}  // namespace

struct Tokenizer::Impl {
  TokenizerData data;
  std::vector<std::string> bytes;  // each token's bytes
  std::array<TokenId, 256> byte_token{};
  MergeTable merges;
  std::unordered_map<std::string, TokenId> by_text;
  // Control/UserDefined tokens matched in text, grouped by first byte, longest first.
  std::array<std::vector<TokenId>, 256> specials_by_byte;
  std::array<bool, 256> special_first{};
  std::vector<bool> eog;

  Status build();
  Status build_merges();
  void encode_fragment(std::string_view text, Work& work, std::vector<TokenId>& out) const;
  void bpe(std::string_view piece, Work& work, std::vector<TokenId>& out) const;
};

Status Tokenizer::Impl::build() {
  if (data.model != "gpt2") {
    return Status::error(fmt::format(
        "tokenizer: tokenizer.ggml.model: unsupported model '{}' (expected gpt2)", data.model));
  }
  if (data.pre != "qwen35") {
    return Status::error(fmt::format(
        "tokenizer: tokenizer.ggml.pre: unsupported pre-tokenizer '{}' (expected qwen35)", data.pre));
  }
  const size_t n = data.tokens.size();
  if (n == 0) return Status::error("tokenizer: tokenizer.ggml.tokens is empty");
  if (n > 0x7FFFFFFF) return Status::error("tokenizer: too many tokens");
  if (data.token_types.empty()) data.token_types.assign(n, TokenType::Normal);
  if (data.token_types.size() != n) {
    return Status::error(fmt::format(
        "tokenizer: tokenizer.ggml.token_type has {} entries (expected {}, one per token)",
        data.token_types.size(), n));
  }
  for (auto [name, id] : {std::pair{"bos", data.bos_id}, {"eos", data.eos_id}, {"padding", data.pad_id}}) {
    if (id != kNoToken && (id < 0 || static_cast<size_t>(id) >= n)) {
      return Status::error(fmt::format("tokenizer: tokenizer.ggml.{}_token_id: {} is out of range (expected < {})",
                                       name, id, n));
    }
  }

  bytes.resize(n);
  by_text.reserve(n * 2);
  byte_token.fill(kNoToken);
  eog.assign(n, false);
  std::string decoded;
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = data.tokens[i];
    const auto id = static_cast<TokenId>(i);
    by_text.emplace(text, id);
    TokenType type = data.token_types[i];
    bool raw = type == TokenType::Control || type == TokenType::UserDefined || type == TokenType::Unknown ||
               type == TokenType::Unused;
    if (!raw && alphabet_decode(text, decoded)) {
      bytes[i] = decoded;
      if (decoded.size() == 1) {
        auto b = static_cast<uint8_t>(decoded[0]);
        if (byte_token[b] == kNoToken) byte_token[b] = id;
      }
    } else {
      bytes[i] = text;
    }
    bool matched_in_text = type == TokenType::Control || type == TokenType::UserDefined || type == TokenType::Unknown;
    if (matched_in_text && !text.empty()) {
      auto b = static_cast<uint8_t>(text[0]);
      specials_by_byte[b].push_back(id);
      special_first[b] = true;
    }
    if (type == TokenType::Control) {
      for (const char* t : kEogTexts) eog[i] = eog[i] || text == t;
    }
  }
  if (data.eos_id != kNoToken) eog[data.eos_id] = true;
  for (int b = 0; b < 256; ++b) {
    if (byte_token[b] == kNoToken) {
      return Status::error(fmt::format(
          "tokenizer: byte 0x{:02X} has no token (a byte-level vocabulary needs all 256)", b));
    }
    auto& list = specials_by_byte[b];
    std::stable_sort(list.begin(), list.end(), [&](TokenId x, TokenId y) {
      return data.tokens[x].size() > data.tokens[y].size();
    });
  }
  return build_merges();
}

Status Tokenizer::Impl::build_merges() {
  merges.reserve(data.merges.size());
  for (size_t rank = 0; rank < data.merges.size(); ++rank) {
    const std::string& m = data.merges[rank];
    size_t space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 >= m.size() ||
        m.find(' ', space + 1) != std::string::npos) {
      return Status::error(fmt::format(
          "tokenizer: tokenizer.ggml.merges[{}]: '{}' is not two tokens separated by one space", rank, m));
    }
    auto left = by_text.find(m.substr(0, space));
    auto right = by_text.find(m.substr(space + 1));
    auto merged = by_text.find(m.substr(0, space) + m.substr(space + 1));
    if (left == by_text.end() || right == by_text.end() || merged == by_text.end()) {
      return Status::error(fmt::format(
          "tokenizer: tokenizer.ggml.merges[{}]: '{}' names a token that is not in the vocabulary", rank, m));
    }
    merges.insert(left->second, right->second, static_cast<int32_t>(rank), merged->second);
  }
  return Status::ok_status();
}

// Byte-pair merges of one piece, in HF tokenizers' order (word.rs merge_all): a heap of
// candidate pairs by (rank, position); a popped candidate is stale when its left symbol
// was merged away or its pair no longer produces the same token.
void Tokenizer::Impl::bpe(std::string_view piece, Work& work, std::vector<TokenId>& out) const {
  auto& sym = work.symbols;
  auto& heap = work.heap;
  const auto n = static_cast<int32_t>(piece.size());
  sym.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    sym[i] = {byte_token[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  heap.clear();
  auto push = [&](int32_t pos) {
    int32_t next = sym[pos].next;
    if (next < 0) return;
    if (const MergeTable::Entry* e = merges.find(sym[pos].id, sym[next].id)) {
      heap.push_back({e->rank, pos, e->result});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    const MergeTable::Entry* e = merges.find(left.id, right.id);
    if (!e || e->result != top.result) continue;
    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

void Tokenizer::Impl::encode_fragment(std::string_view text, Work& work, std::vector<TokenId>& out) const {
  for (size_t pos = 0; pos < text.size();) {
    work.spans.clear();
    pos = split_qwen35_step(text, pos, kSplitBatch, work.spans);
    for (const Span& span : work.spans) {
      std::string_view piece = text.substr(span.begin, span.end - span.begin);
      if (piece.size() == 1) {
        out.push_back(byte_token[static_cast<uint8_t>(piece[0])]);
        continue;
      }
      if (piece.size() > kMaxCachedPiece) {
        bpe(piece, work, out);
        continue;
      }
      uint64_t h = hash_piece(piece);
      if (work.cache.find(piece, h, out)) continue;
      size_t first = out.size();
      bpe(piece, work, out);
      work.cache.insert(piece, h, out.data() + first, out.size() - first);
    }
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::create(TokenizerData data) {
  auto impl = std::make_unique<Impl>();
  impl->data = std::move(data);
  if (Status s = impl->build(); !s.ok()) return s;
  return Tokenizer(std::move(impl));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, EncodeOptions options) const {
  const Impl& im = *impl_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  if (options.add_special && im.data.add_bos && im.data.bos_id != kNoToken) out.push_back(im.data.bos_id);
  Work work;
  // Special tokens first: scan for their first bytes, take the longest match at the
  // leftmost position (HF's added-vocabulary matching), and BPE the text between matches.
  size_t fragment = 0;
  for (size_t pos = 0; pos < text.size();) {
    auto b = static_cast<uint8_t>(text[pos]);
    TokenId hit = kNoToken;
    if (im.special_first[b]) {
      for (TokenId id : im.specials_by_byte[b]) {
        TokenType type = im.data.token_types[id];
        if (!options.parse_special && type != TokenType::UserDefined) continue;
        const std::string& t = im.data.tokens[id];
        if (text.compare(pos, t.size(), t) == 0) {
          hit = id;
          break;
        }
      }
    }
    if (hit == kNoToken) {
      ++pos;
      continue;
    }
    if (pos > fragment) im.encode_fragment(text.substr(fragment, pos - fragment), work, out);
    out.push_back(hit);
    pos += im.data.tokens[hit].size();
    fragment = pos;
  }
  if (fragment < text.size()) im.encode_fragment(text.substr(fragment), work, out);
  if (options.add_special && im.data.add_eos && im.data.eos_id != kNoToken) out.push_back(im.data.eos_id);
  return out;
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  const Impl& im = *impl_;
  if (id < 0 || static_cast<size_t>(id) >= im.bytes.size()) return {};
  TokenType type = im.data.token_types[id];
  bool special = type == TokenType::Control || type == TokenType::Unknown || type == TokenType::Unused;
  if (special && !render_special) return {};
  return im.bytes[id];
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool render_special) const {
  std::string out;
  for (TokenId id : ids) out += token_to_piece(id, render_special);
  return out;
}

size_t Tokenizer::vocab_size() const { return impl_->data.tokens.size(); }
TokenType Tokenizer::token_type(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_size()) return TokenType::Undefined;
  return impl_->data.token_types[id];
}
const std::string& Tokenizer::token_text(TokenId id) const { return impl_->data.tokens.at(id); }
TokenId Tokenizer::find_token(std::string_view text) const {
  auto it = impl_->by_text.find(std::string(text));
  return it == impl_->by_text.end() ? kNoToken : it->second;
}
TokenId Tokenizer::bos_id() const { return impl_->data.bos_id; }
TokenId Tokenizer::eos_id() const { return impl_->data.eos_id; }
bool Tokenizer::is_eog(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->eog.size() && impl_->eog[id];
}
const TokenizerData& Tokenizer::data() const { return impl_->data; }

std::string StreamDecoder::push(TokenId id) {
  pending_ += tokenizer_->token_to_piece(id, render_special_);
  size_t ready = utf8_complete_prefix(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace strata::model
