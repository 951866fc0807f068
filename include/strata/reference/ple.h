// PLE: per-layer hashed n-gram embeddings injected into the wide residual (spec/model.md §5).
// Three parts: the hash constants (derivable from the seed; the file carries them as u64
// metadata arrays, which are what the forward uses), the n-gram context with the EOS rule
// and the row hash, and the gated injection with its dilated conv.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/model/config.h"
#include "strata/model/weights.h"
#include "strata/reference/state.h"
#include "strata/reference/thread_pool.h"

namespace strata::reference {

// ---- Hash constants (spec §5.1, Appendix A) ----------------------------------------------
uint64_t splitmix64(uint64_t v);
// m_i = 2 * (splitmix(seed + 10007*ple_layer_index + 0x9E3779B97F4A7C15*(i+1)) mod half) + 1,
// half = max(1, ((2^63-1) div vocab) div 2), for i < ngram_size (64-bit wrapping arithmetic).
std::vector<uint64_t> ple_multipliers(uint64_t vocab_size, uint32_t ngram_size, uint32_t ple_layer_index, uint64_t seed);
// The moduli: head h gets the (g+1)-th prime > base-1, g = ple_layer_index*n_heads + h.
std::vector<uint64_t> ple_head_sizes(uint64_t vocab_base, uint32_t n_heads, uint32_t ple_layer_index);
// Running sums of the sizes.
std::vector<uint64_t> ple_head_offsets(const std::vector<uint64_t>& sizes);

// ---- Context and hash (spec §5.2, §5.3) --------------------------------------------------
// The n-gram context c[0..ngram_size-1] of every token of `tokens`, given the cached previous
// ngram_size-1 raw ids (oldest first). c[0] is the token; c[s] is the token s back, or EOS
// when that predecessor is missing or lies at/before an EOS strictly before the token.
// Returns [n_tok, ngram_size]; `context` is updated to the last ngram_size-1 raw ids.
std::vector<int64_t> ple_contexts(const model::PleConfig& ple, std::vector<int32_t>& context,
                                  std::span<const int32_t> tokens);
// The n_heads table rows of one token: heads of order n (n = 2..ngram_size) hash
// XOR_{j<n} (c[j] * m[j]) (wrapping u64), row_h = hash mod size_h + offset_h.
std::vector<uint64_t> ple_rows(const model::PleConfig& ple, const int64_t* ctx);

// ---- Injection (spec §5.4) ---------------------------------------------------------------
// Adds PLE(X) to the wide residual x [n_tok, S*H] in place for the block carrying PLE.
void ple_inject(const model::ModelConfig& c, const model::Block& blk, const model::Tensor& table, PleState& state,
                std::span<const int32_t> tokens, std::vector<float>& x, ThreadPool& pool);

}  // namespace strata::reference
