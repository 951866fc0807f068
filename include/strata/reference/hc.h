// Hyper-connections (spec/model.md §4): the mix that turns the wide residual X [S x H] into
// a block input u [H] plus injection weights alpha [S], and the combine that writes the
// block output back into every stream. The final mixer and the MTP head mixer are the mix
// without injection.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/model/weights.h"
#include "strata/reference/thread_pool.h"

namespace strata::reference {

// One HC site's weights (hc_attn_*, hc_ffn_*, output_hc_*, nextn.hc_head_*).
struct HcWeights {
  const model::Tensor* norm = nullptr;    // [S*H], grouped per stream
  const model::Tensor* down = nullptr;    // [S*H -> rank]
  const model::Tensor* up = nullptr;      // [rank -> S*H]
  const model::Tensor* inject = nullptr;  // [S*H -> S]; null for a final mixer
};

struct HcMix {
  std::vector<float> u;      // [T, H]: the block input
  std::vector<float> alpha;  // [T, S]: 2*sigmoid(inject(Xn)/S); empty without inject
};

// Steps 1-5 of spec §4 for T rows of X [T, S*H].
HcMix hc_mix(const HcWeights& w, int64_t n_streams, int64_t hidden, float eps, const std::vector<float>& x,
             int64_t n_tok, ThreadPool& pool);

// Step 6: X[t, s, :] += alpha[t, s] * y[t, :] (the un-normalised residual takes the update).
void hc_combine(std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& alpha,
                int64_t n_streams, int64_t hidden, int64_t n_tok);

}  // namespace strata::reference
