// The reference linear layer over a bound GGUF tensor of any type: y = W x for a batch of
// activation rows. Quantized weight rows are dequantized (bit-exact reference dequantizers)
// one row at a time into a scratch buffer, then dotted in double (ops.h dot). Each output
// element is computed by the same code whatever the batch size or thread count, so a token
// gets bit-identical projections in a prefill batch and alone in decode.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/model/weights.h"
#include "strata/reference/thread_pool.h"

namespace strata::reference {

// ---- Engine activation numerics ----------------------------------------------------------------
// Off by default: every product takes the fp32 activations x as given (the reference's own
// arithmetic; bit-identical to a build without this switch). On: a product whose weight type
// takes q8_1 activations in the engine (quant::takes_q8_1_activations: every quantized type with a
// CUDA mmvq kernel) first rounds each activation row through q8_1 and back
// (quant::quantize_row_q8_1, then quant::dequantize_row(Q8_1)), exactly as the CUDA decoder
// quantizes the rows it feeds those weights (its q8_1 bytes equal quantize_row_q8_1's). Weights
// of F32/F16/BF16 (and the small tensors read as fp32 through Tensor::f32 by dot(), such as the
// shared expert's gate) are never rounded: the engine feeds those f32 activations.
//
// Why a process-wide setting and not a flag on Model or on each call: every weight product of the
// forward (hc, gdn, attention, moe, ple, head, mtp) goes through matmul() below, and none of
// those call sites takes a Model; threading a flag through all their signatures would touch the
// whole reference for a switch that exists for one user. Only `strata parity`'s whole-step
// decoder check (src/cuda/parity_decoder.cpp) turns it on, through ScopedEngineActivationNumerics,
// around its reference forwards on a quantized model; nothing else in the process runs a forward
// meanwhile. The setting is read once per matmul() call, on the calling thread.
void set_engine_activation_numerics(bool on);
bool engine_activation_numerics();

// Sets the mode for a scope and restores the previous value on exit.
class ScopedEngineActivationNumerics {
 public:
  explicit ScopedEngineActivationNumerics(bool on) : previous_(engine_activation_numerics()) {
    set_engine_activation_numerics(on);
  }
  ~ScopedEngineActivationNumerics() { set_engine_activation_numerics(previous_); }
  ScopedEngineActivationNumerics(const ScopedEngineActivationNumerics&) = delete;
  ScopedEngineActivationNumerics& operator=(const ScopedEngineActivationNumerics&) = delete;

 private:
  bool previous_;
};

// y[t * ldy + r] = sum_c W[rows.first_row + r, c] * x[t * ldx + c]
// for r < rows.n_rows and t < n_tok; W's row length (ne[0]) is the input width. With engine
// activation numerics on and a q8_1-taking weight type, x is each row's q8_1 round trip.
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
