// PLE, the hashed n-gram injection (spec/model.md §5.4), device part. The host computes the
// n-gram contexts and the table rows (src/reference/ple.cpp's functions), copies the rows' raw
// blocks to the device, and the decoder dequantizes them (get_rows) into E [T, n_heads*row_dim]
// and runs key_proj -> kp [T, S*H] and value_proj -> vp [T, H] with linear(). Then ple_inject:
//   K = grouped_norm(kp; norm_key), Q = grouped_norm(X; norm_query)
//   a_s = K_s . Q_s / sqrt(H); a'_s = sign(a_s) sqrt(max(|a_s|, 1e-6)); GV_s = sigmoid(a'_s) vp
//   N = grouped_norm(GV; norm_conv); C_t = silu(sum_j conv_w[c, j] N_{t - ngram*(K-1-j)}[c])
//   X += GV + C
// The N history holds history = (K - 1) * ngram rows plus the window's T (rollback as gdn.h:
// ple_conv_commit(n) keeps the `history` rows that end at accepted row n). Host-only header.
#pragma once

#include <cstdint>

#include "strata/common/status.h"
#include "strata/cuda/mmvq.h"

namespace strata::cuda {

struct PleDims {
  int S = 0, H = 0;          // streams, hidden (the wide width is S * H)
  int ngram = 0;             // conv dilation (ple.ngram_size)
  int conv_kernel = 0;       // K
  float eps = 1e-6f;
  int history() const { return (conv_kernel - 1) * ngram; }
};

// kp [T, S*H], vp [T, H], x [T, S*H] updated in place; norms [S*H] f32; conv_w [S*H, K] f32;
// hist [(history + T), S*H] f32, rows 0 .. history-1 the previous N rows oldest first (zeros at
// the start of a sequence).
Status ple_inject(const PleDims& d, const float* kp, const float* vp, const float* norm_key, const float* norm_query,
                  const float* norm_conv, const float* conv_w, float* hist, float* x, int T, Stream stream);

// hist rows n .. n + history - 1 move to rows 0 .. history - 1.
Status ple_conv_commit(const PleDims& d, float* hist, int n, Stream stream);

}  // namespace strata::cuda
