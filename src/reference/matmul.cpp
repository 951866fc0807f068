#include "strata/reference/matmul.h"

#include <atomic>
#include <cassert>
#include <cstdlib>

#include <fmt/format.h>

#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"
#include "strata/quant/types.h"
#include "strata/reference/ops.h"

namespace strata::reference {

namespace {

// Weights were validated at bind time (type has a dequantizer, whole blocks per row), so a
// failure here is a broken invariant, not a user error.
void dequantize_or_die(const model::Tensor& w, int64_t row, float* out) {
  const Status s = quant::dequantize_row(w.type, w.row(row), out, w.cols());
  if (!s.ok()) {
    fmt::print(stderr, "strata: reference: dequantize {} row {}: {}\n", w.name ? *w.name : "?", row, s.message());
    std::abort();
  }
}

std::atomic<bool> g_engine_activation_numerics{false};

// rows x cols activations -> their q8_1 round trip (quantize_row_q8_1, dequantize_row(Q8_1)),
// packed [rows, cols]. The engine's quantizer writes the same bytes, so these are the values its
// q8_1 mat-vecs see.
std::vector<float> q8_1_round_trip(const float* x, int64_t ldx, int64_t rows, int64_t cols) {
  assert(cols % 32 == 0);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  std::vector<uint8_t> q8(static_cast<size_t>(*quant::row_bytes(quant::Type::Q8_1, static_cast<uint64_t>(cols))));
  for (int64_t t = 0; t < rows; ++t) {
    quant::quantize_row_q8_1(x + t * ldx, q8.data(), cols);
    const Status s = quant::dequantize_row(quant::Type::Q8_1, q8.data(), out.data() + t * cols, cols);
    if (!s.ok()) {
      fmt::print(stderr, "strata: reference: q8_1 round trip: {}\n", s.message());
      std::abort();
    }
  }
  return out;
}

}  // namespace

void set_engine_activation_numerics(bool on) { g_engine_activation_numerics.store(on, std::memory_order_relaxed); }

bool engine_activation_numerics() { return g_engine_activation_numerics.load(std::memory_order_relaxed); }

void tensor_row(const model::Tensor& w, int64_t row, float* out) {
  assert(row >= 0 && row < w.rows());
  if (w.f32) {
    const float* src = w.f32 + row * w.cols();
    std::copy(src, src + w.cols(), out);
    return;
  }
  dequantize_or_die(w, row, out);
}

std::span<const float> f32_span(const model::Tensor& w) {
  assert(w.f32 != nullptr);
  return {w.f32, static_cast<size_t>(w.n_elements())};
}

void matmul(const model::MatrixRows& rows, const float* x, int64_t ldx, int64_t n_tok, float* y, int64_t ldy,
            ThreadPool& pool) {
  const model::Tensor& w = *rows.tensor;
  const int64_t cols = w.cols();
  assert(rows.first_row >= 0 && rows.first_row + rows.n_rows <= w.rows());
  // Engine activation numerics (matmul.h): the activations this weight type gets in the engine.
  // A q8_1-taking type's rows are whole blocks of a multiple of 32 values (types.h), so every
  // row quantizes; the engine refuses other widths (mmvq wants a multiple of 32) for any type.
  std::vector<float> rounded;
  if (engine_activation_numerics() && quant::takes_q8_1_activations(w.type)) {
    rounded = q8_1_round_trip(x, ldx, n_tok, cols);
    x = rounded.data();
    ldx = cols;
  }
  // Rows are split across threads; each weight row is converted once and used for every token.
  pool.parallel_for(rows.n_rows, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t wr = rows.first_row + r;
      const float* wrow = nullptr;
      if (w.f32) {
        wrow = w.f32 + wr * cols;
      } else {
        scratch.resize(cols);
        dequantize_or_die(w, wr, scratch.data());
        wrow = scratch.data();
      }
      for (int64_t t = 0; t < n_tok; ++t) y[t * ldy + r] = dot(wrow, x + t * ldx, cols);
    }
  }, 4);
}

std::vector<float> matmul(const model::Tensor& w, const std::vector<float>& x, int64_t n_tok, ThreadPool& pool) {
  assert(static_cast<int64_t>(x.size()) == n_tok * w.cols());
  std::vector<float> y(n_tok * w.rows());
  matmul({&w, 0, w.rows()}, x.data(), w.cols(), n_tok, y.data(), w.rows(), pool);
  return y;
}

}  // namespace strata::reference
