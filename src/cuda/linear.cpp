// The typed mat-vec entry of the decoder (linear.h): picks the activation form W needs.
#include "linear.h"

#include <string>

#include "strata/cuda/quantize.h"

namespace strata::cuda {

Status quantize_act(const Act& act, Stream stream) {
  if (!act.q8) return Status::error("cuda::quantize_act: no q8_1 buffer for this activation");
  return quantize_q8_1(act.f32, act.f32_stride, act.cols, act.T, act.q8, act.q8_stride, stream);
}

Status linear(const DTensor& w, const Act& act, float* y, int64_t y_stride, Stream stream) {
  if (w.cols != act.cols) {
    return Status::error("cuda::linear: weight has " + std::to_string(w.cols) + " columns, activation " +
                         std::to_string(act.cols));
  }
  MmvqArgs a;
  a.type = w.type;
  a.weights = w.data;
  a.rows = w.rows;
  a.cols = w.cols;
  a.T = act.T;
  a.y = y;
  a.y_stride = y_stride;
  if (mmvq_takes_q8_1(w.type)) {
    a.act = act.q8;
    a.act_stride = act.q8_stride;
  } else {
    a.act = act.f32;
    a.act_stride = act.f32_stride * static_cast<int64_t>(sizeof(float));
  }
  return mmvq(a, stream);
}

}  // namespace strata::cuda
