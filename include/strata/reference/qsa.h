// QSA block selection (spec/model.md §7.2): which cached tokens a query attends to.
// Index keys are cached raw (no norm, no RoPE); a complete block of `ratio` tokens gets one
// key: the fp32 mean of its raw keys, k_norm'ed, then roped at the block's first position.
// A query that sees n tokens scores its nb = n / ratio complete blocks with
// (1/sqrt(d)) * sum_h relu(q_h . kb), keeps the best top_blocks = top_k / ratio of them and
// always the tail of 0..ratio-1 newest tokens of the incomplete block. With nb <= top_blocks
// every token is selected (dense), so tests shorter than ~top_k tokens never go sparse.
//
// Tie rule (Strata's, documented; torch.topk's order is unspecified): equal scores keep the
// lower block index. Exact ties are realistic: a block whose head dots are all <= 0 scores 0.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/reference/ops.h"

namespace strata::reference {

// The key of one complete block from its `ratio` raw keys (ratio x d, row-major).
void qsa_block_key(const float* raw_keys, int64_t ratio, int64_t d, std::span<const float> k_norm, float eps,
                   const Rope& rope, int64_t first_pos, float* out);

// Scores of nb blocks for one query: q is n_heads x d (q_norm'ed and roped at the query's
// position), block_keys nb x d.
std::vector<float> qsa_block_scores(const float* q, int64_t n_heads, int64_t d, const float* block_keys, int64_t nb);

// The selected token indices (ascending) of a query that sees tokens 0..n_visible-1.
// scores holds one score per complete block (n_visible / ratio of them); it is only read
// when there are more complete blocks than top_blocks.
std::vector<int32_t> qsa_select(int64_t n_visible, int64_t ratio, int64_t top_blocks, std::span<const float> scores);

}  // namespace strata::reference
