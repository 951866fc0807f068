// QSA selection, following transformers' Qwen4ExpTextQSAIndexer.forward for an unpadded
// sequence (visible tokens = 0..p, blocks aligned to the sequence start).
#include "strata/reference/qsa.h"

#include <algorithm>
#include <cmath>

namespace strata::reference {

void qsa_block_key(const float* raw_keys, int64_t ratio, int64_t d, std::span<const float> k_norm, float eps,
                   const Rope& rope, int64_t first_pos, float* out) {
  std::span<float> key(out, static_cast<size_t>(d));
  for (int64_t a = 0; a < d; ++a) {
    // torch .float().mean(dim=1): a sum over the block's tokens, then a division.
    float sum = 0.0f;
    for (int64_t r = 0; r < ratio; ++r) sum += raw_keys[r * d + a];
    key[a] = sum / static_cast<float>(ratio);
  }
  rms_norm(key, k_norm, eps, key);
  rope_apply(key, rope_angles(rope, text_pos(first_pos)));
}

std::vector<float> qsa_block_scores(const float* q, int64_t n_heads, int64_t d, const float* block_keys, int64_t nb) {
  const float sqrt_d = static_cast<float>(std::sqrt(static_cast<double>(d)));
  std::vector<float> scores(nb);
  for (int64_t b = 0; b < nb; ++b) {
    float sum = 0.0f;
    for (int64_t h = 0; h < n_heads; ++h) sum += std::max(0.0f, dot(q + h * d, block_keys + b * d, d));
    scores[b] = sum / sqrt_d;
  }
  return scores;
}

std::vector<int32_t> qsa_select(int64_t n_visible, int64_t ratio, int64_t top_blocks, std::span<const float> scores) {
  const int64_t nb = n_visible / ratio;
  std::vector<int32_t> tokens;
  if (nb <= top_blocks) {
    tokens.resize(n_visible);
    for (int64_t i = 0; i < n_visible; ++i) tokens[i] = static_cast<int32_t>(i);
    return tokens;
  }
  std::vector<int32_t> blocks = top_k(scores.first(nb), top_blocks);
  std::sort(blocks.begin(), blocks.end());
  for (int32_t b : blocks) {
    for (int64_t r = 0; r < ratio; ++r) tokens.push_back(static_cast<int32_t>(b * ratio + r));
  }
  // The tail: the incomplete block's tokens, never scored, always kept.
  for (int64_t i = nb * ratio; i < n_visible; ++i) tokens.push_back(static_cast<int32_t>(i));
  return tokens;
}

}  // namespace strata::reference
