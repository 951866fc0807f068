// PLE, following transformers' Qwen4ExpTextNGramEmbedding / Qwen4ExpTextPLELayer.
#include "strata/reference/ple.h"

#include <cassert>
#include <cmath>

#include "strata/reference/matmul.h"
#include "strata/reference/ops.h"

namespace strata::reference {

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kPrime1 = 10007;

bool is_prime(uint64_t v) {
  if (v < 2) return false;
  if (v % 2 == 0) return v == 2;
  for (uint64_t d = 3; d * d <= v; d += 2) {
    if (v % d == 0) return false;
  }
  return true;
}

}  // namespace

uint64_t splitmix64(uint64_t v) {
  v += kGamma;
  v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
  v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
  return v ^ (v >> 31);
}

std::vector<uint64_t> ple_multipliers(uint64_t vocab_size, uint32_t ngram_size, uint32_t ple_layer_index, uint64_t seed) {
  const uint64_t m_max = static_cast<uint64_t>(INT64_MAX) / std::max<uint64_t>(vocab_size, 1);
  const uint64_t half = std::max<uint64_t>(1, m_max / 2);
  const uint64_t base = seed + kPrime1 * ple_layer_index;
  std::vector<uint64_t> m;
  for (uint32_t i = 0; i < ngram_size; ++i) m.push_back(2 * (splitmix64(base + kGamma * (i + 1)) % half) + 1);
  return m;
}

std::vector<uint64_t> ple_head_sizes(uint64_t vocab_base, uint32_t n_heads, uint32_t ple_layer_index) {
  // The g-th head takes the (g+1)-th prime after base-1: walk the primes once.
  std::vector<uint64_t> sizes;
  uint64_t p = vocab_base - 1;
  const uint32_t first = ple_layer_index * n_heads;
  for (uint32_t g = 0; g < first + n_heads; ++g) {
    do ++p; while (!is_prime(p));
    if (g >= first) sizes.push_back(p);
  }
  return sizes;
}

std::vector<uint64_t> ple_head_offsets(const std::vector<uint64_t>& sizes) {
  std::vector<uint64_t> off;
  uint64_t sum = 0;
  for (uint64_t s : sizes) {
    off.push_back(sum);
    sum += s;
  }
  return off;
}

std::vector<int64_t> ple_contexts(const model::PleConfig& ple, std::vector<int32_t>& context,
                                  std::span<const int32_t> tokens) {
  const int64_t n = ple.ngram_size;
  const int64_t eos = ple.eos_token_id;
  // history = [cached ngram-1 ids, new tokens]; token t sits at history index n-1+t.
  std::vector<int64_t> hist(context.begin(), context.end());
  hist.insert(hist.end(), tokens.begin(), tokens.end());
  std::vector<int64_t> out(tokens.size() * n);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t i = n - 1 + static_cast<int64_t>(t);
    int64_t* c = out.data() + t * n;
    c[0] = hist[i];
    // Walking back from the token: a missing predecessor or an EOS cuts the window, and
    // everything older reads as EOS too. The token's own EOS (c[0]) does not cut.
    bool cut = false;
    for (int64_t s = 1; s < n; ++s) {
      const int64_t src = i - s;
      if (src < 0 || hist[src] == eos) cut = true;
      c[s] = cut ? eos : hist[src];
    }
  }
  const size_t keep = n - 1;
  std::vector<int64_t> tail(hist.end() - keep, hist.end());
  for (size_t k = 0; k < keep; ++k) context[k] = static_cast<int32_t>(tail[k]);
  return out;
}

std::vector<uint64_t> ple_rows(const model::PleConfig& ple, const int64_t* ctx) {
  std::vector<uint64_t> rows(ple.n_heads);
  uint64_t hash = static_cast<uint64_t>(ctx[0]) * ple.multipliers[0];
  for (uint32_t n = 2; n <= ple.ngram_size; ++n) {
    hash ^= static_cast<uint64_t>(ctx[n - 1]) * ple.multipliers[n - 1];
    for (uint32_t k = 0; k < ple.heads_per_ngram; ++k) {
      const uint32_t h = (n - 2) * ple.heads_per_ngram + k;
      // transformers hashes in int64 and takes torch.remainder (the sign of the divisor). For
      // ids below the vocab the hash is < 2^63 and this is the plain unsigned modulus; a
      // larger id (an EOS beyond a tiny test vocab) can wrap negative, where the floor
      // modulus differs from the unsigned one, and transformers is the spec.
      const int64_t signed_hash = static_cast<int64_t>(hash);
      const int64_t size = static_cast<int64_t>(ple.head_sizes[h]);
      int64_t r = signed_hash % size;
      if (r < 0) r += size;
      rows[h] = static_cast<uint64_t>(r) + ple.head_offsets[h];
    }
  }
  return rows;
}

void ple_inject(const model::ModelConfig& c, const model::Block& blk, const model::Tensor& table, PleState& state,
                std::span<const int32_t> tokens, std::vector<float>& x, ThreadPool& pool) {
  const model::PleConfig& ple = c.ple;
  const int64_t n_tok = static_cast<int64_t>(tokens.size());
  const int64_t hidden = c.n_embd, wide = c.n_wide(), streams = c.hc_count, dim = ple.embed_dim();

  // E_t = concat of the n_heads table rows (head-major).
  const std::vector<int64_t> ctx = ple_contexts(ple, state.context, tokens);
  std::vector<float> emb(n_tok * dim);
  for (int64_t t = 0; t < n_tok; ++t) {
    const std::vector<uint64_t> rows = ple_rows(ple, ctx.data() + t * ple.ngram_size);
    for (uint32_t h = 0; h < ple.n_heads; ++h) {
      tensor_row(table, static_cast<int64_t>(rows[h]), emb.data() + t * dim + h * ple.row_dim);
    }
  }

  std::vector<float> key = matmul(blk.ple_key, emb, n_tok, pool);      // [T, W]
  const std::vector<float> value = matmul(blk.ple_value, emb, n_tok, pool);  // [T, H]
  std::vector<float> query(x.size());
  std::vector<float> gated(n_tok * wide), normed(n_tok * wide);
  const float sqrt_h = static_cast<float>(std::sqrt(static_cast<double>(hidden)));
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto row = [&](std::vector<float>& v) { return std::span<float>(v.data() + t * wide, wide); };
    grouped_rms_norm(row(key), f32_span(blk.ple_norm_key), hidden, c.rms_eps, row(key));
    grouped_rms_norm(row(x), f32_span(blk.ple_norm_query), hidden, c.rms_eps, row(query));
    for (int64_t s = 0; s < streams; ++s) {
      const int64_t o = t * wide + s * hidden;
      float a = dot(key.data() + o, query.data() + o, hidden) / sqrt_h;
      // Signed square root with a 1e-6 clamp; sign(0) = 0 gives a zero logit.
      const float sign = a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : 0.0f);
      a = std::sqrt(std::max(std::fabs(a), 1e-6f)) * sign;
      const float gate = sigmoid(a);
      for (int64_t j = 0; j < hidden; ++j) gated[o + j] = gate * value[t * hidden + j];
    }
    grouped_rms_norm(row(gated), f32_span(blk.ple_norm_conv), hidden, c.rms_eps, row(normed));
  }

  std::vector<float> conv(n_tok * wide);
  causal_conv_silu(blk.ple_conv1d.f32, wide, ple.conv_kernel, ple.ngram_size, state.conv, normed.data(), n_tok,
                   conv.data());
  // X + (GV + C): the residual takes the un-normalised gated value plus the conv.
  for (int64_t i = 0; i < n_tok * wide; ++i) x[i] += gated[i] + conv[i];
}

}  // namespace strata::reference
