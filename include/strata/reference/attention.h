// Full attention with QSA (spec/model.md §7): q/k norms, partial interleaved M-RoPE at text
// positions, GQA, the per-head sigmoid output gate, and the QSA indexer choosing which
// cached tokens each query sees. Used by the trunk attention blocks and the MTP block.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/model/config.h"
#include "strata/model/weights.h"
#include "strata/reference/state.h"
#include "strata/reference/thread_pool.h"

namespace strata::reference {

// n_tok new tokens at positions cache.n .. cache.n + n_tok - 1; appends their K/V and index
// keys to the cache. compress_ratio 0, or a block without indexer tensors, means dense.
// u: [n_tok, H]; returns [n_tok, H].
std::vector<float> attention_layer(const model::ModelConfig& c, const model::Block& blk, uint32_t compress_ratio,
                                   AttnCache& cache, const std::vector<float>& u, int64_t n_tok, ThreadPool& pool);

}  // namespace strata::reference
