// The MoE FFN of every block (spec/model.md §8): softmax router, top-k with renormalisation,
// SiLU-gated routed experts, and the shared expert with its scalar sigmoid gate.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/model/weights.h"
#include "strata/reference/stage.h"
#include "strata/reference/thread_pool.h"

namespace strata::reference {

struct Routing {
  std::vector<int32_t> experts;  // k expert ids, by probability descending (ties: lower id first)
  std::vector<float> weights;    // their probabilities renormalised to sum 1
};

// softmax over all experts (fp32), the k most probable, p_e / sum of the k.
Routing route(std::span<const float> logits, int64_t k);

// y = sum over routed experts in ascending id of w_e * down_e(silu(gate_e u) * up_e u),
// then + sigmoid(gate_inp_shexp . u) * shared(u) — transformers' eager order (errata 3).
// u: [n_tok, H]; returns [n_tok, H]. Emits router / experts / shared stages.
std::vector<float> moe_layer(const model::Block& blk, int64_t n_expert_used, const std::vector<float>& u,
                             int64_t n_tok, int block_index, int64_t pos0, const StageSink* sink, ThreadPool& pool);

}  // namespace strata::reference
