// The head's tail on the GPU: argmax and sampling over T rows of logits, with the rules of
// engine::Sampler (include/strata/engine/sampler.h): temperature, top-k, softmax, top-p, min-p,
// then the draw walks the kept tokens in ascending id with a uniform u the host draws from the
// sampler's own generator, so a seed gives the same tokens as the CPU path whenever the kept
// probabilities agree. Ties go to the lower token id; -inf and NaN are never chosen. Host-only.
#pragma once

#include <cstdint>

#include "strata/common/status.h"
#include "strata/cuda/mmvq.h"

namespace strata::cuda {

// out[t] = the lowest index of the largest finite logit of row t (-1 if none is finite).
Status argmax_rows(const float* logits, int T, int64_t n_vocab, int32_t* out, Stream stream);

struct SampleParams {
  float temperature = 1.0f;  // > 0 (greedy callers use argmax_rows)
  int32_t top_k = 0;         // 1 .. kMaxSampleTopK, or 0 for off (then top_p / min_p apply to all)
  float top_p = 1.0f;
  float min_p = 0.0f;
};
inline constexpr int32_t kMaxSampleTopK = 1024;

// 0: each row's selection lives in its CTA's shared memory (scratch may be null).
int64_t sample_scratch_bytes(int T, int64_t n_vocab);

// u: [T] uniforms in [0, 1) (device); out [T] token ids (-1 for a row with no finite logit).
// top_k == 0 (off) is sampled here only when n_vocab <= kMaxSampleTopK; over a larger vocabulary
// it returns an error and the caller samples on the host (engine::Sampler).
Status sample_rows(const float* logits, int T, int64_t n_vocab, const SampleParams& p, const double* u,
                   void* scratch, int32_t* out, Stream stream);

}  // namespace strata::cuda
