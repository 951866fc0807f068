// The reference linear layer over a bound GGUF tensor of any type: y = W x for a batch of
// activation rows. Quantized weight rows are dequantized (bit-exact reference dequantizers)
// one row at a time into a scratch buffer, then dotted in double (ops.h dot). Each output
// element is computed by the same code whatever the batch size or thread count, so a token
// gets bit-identical projections in a prefill batch and alone in decode.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/model/weights.h"
#include "strata/reference/thread_pool.h"

namespace strata::reference {

// y[t * ldy + r] = sum_c W[rows.first_row + r, c] * x[t * ldx + c]
// for r < rows.n_rows and t < n_tok; W's row length (ne[0]) is the input width.
void matmul(const model::MatrixRows& rows, const float* x, int64_t ldx, int64_t n_tok, float* y, int64_t ldy,
            ThreadPool& pool);

// The whole 2-D (or flattened) tensor: out is [n_tok, rows()], x is [n_tok, cols()] packed.
std::vector<float> matmul(const model::Tensor& w, const std::vector<float>& x, int64_t n_tok, ThreadPool& pool);

// One row of a tensor as fp32 (embedding lookups, PLE table rows).
void tensor_row(const model::Tensor& w, int64_t row, float* out);

// A small tensor as fp32 (norm weights and the like): Tensor::f32, which bind_weights
// guarantees for every small tensor.
std::span<const float> f32_span(const model::Tensor& w);

}  // namespace strata::reference
