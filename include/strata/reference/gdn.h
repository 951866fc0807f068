// Gated DeltaNet (spec/model.md §6) in the GGUF's tiled value-head order: value head j uses
// key head j mod n_k_heads (spec/gguf-layout.md §3.4), where transformers' grouped order
// uses j div ratio; the converter reorders every value-indexed tensor, so the layer output
// is the same.
//
// Two forms of the same recurrence, as transformers has them:
//   - gdn_recurrent: token by token (decode), q scaled by division by sqrt(d);
//   - gdn_chunked: chunks of 64 with the UT transform (prefill), q scaled by multiplication
//     by d^-0.5. Mathematically equal; rounding differs (tested to ~1e-5).
// Which one runs follows transformers (errata 4): the recurrent form only for a single token
// when the layer already holds state, the chunked form otherwise; GdnPath can force either.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/model/config.h"
#include "strata/model/weights.h"
#include "strata/reference/state.h"
#include "strata/reference/thread_pool.h"

namespace strata::reference {

enum class GdnPath { Auto, Recurrent, Chunked };

struct GdnShape {
  int64_t n_k_heads = 0, n_v_heads = 0, head_dim = 0;
};

// The core rule for n_tok tokens. q, k: [n_tok, n_k_heads, d], already l2-normalised (q not
// yet scaled); v: [n_tok, n_v_heads, d]; g (log-decay) and beta: [n_tok, n_v_heads];
// state: [n_v_heads, d(k), d(v)], updated in place; out: [n_tok, n_v_heads, d].
void gdn_recurrent(const GdnShape& s, const float* q, const float* k, const float* v, const float* g,
                   const float* beta, int64_t n_tok, float* state, float* out, ThreadPool& pool);
void gdn_chunked(const GdnShape& s, const float* q, const float* k, const float* v, const float* g,
                 const float* beta, int64_t n_tok, float* state, float* out, ThreadPool& pool);

inline constexpr int64_t kGdnChunk = 64;  // transformers' chunk_size

// The whole GDN mixer of one block: projections, short conv, gates, the rule, the gated
// norm and ssm_out. u: [n_tok, H]; returns [n_tok, H].
std::vector<float> gdn_layer(const model::ModelConfig& c, const model::Block& blk, GdnState& state,
                             const std::vector<float>& u, int64_t n_tok, GdnPath path, ThreadPool& pool);

}  // namespace strata::reference
