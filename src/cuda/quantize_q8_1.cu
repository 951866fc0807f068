// quantize_q8_1: the activation quantizer. Eight threads own one 32-element block (four floats
// each, one 16-byte load), reduce amax and the code sum with three shuffles, and write the block
// with 4-byte stores. The block body (rounding rule [TAG_Q8_1_RULE]) is q8_1.cuh's, shared with
// the kernels that quantize their own output.
#include "strata/cuda/quantize.h"

#include <cstdint>
#include <string>

#include "common.cuh"
#include "launch.cuh"
#include "q8_1.cuh"

namespace strata::cuda {
namespace {

constexpr int kThreads = 256;  // 32 blocks of 32 elements per CTA

__global__ void __launch_bounds__(kThreads) quantize_q8_1_kernel(const float* __restrict__ x, int64_t x_stride,
                                                                 int nblocks, uint8_t* __restrict__ dst,
                                                                 int64_t dst_stride) {
  pdl_launch_dependents();
  pdl_wait();
  const int row = blockIdx.y;
  const int gi = blockIdx.x * kThreads + threadIdx.x;  // group of 4 elements
  const int blk = gi >> 3, part = gi & 7;
  const bool live = blk < nblocks;  // uniform per 8-lane group: nblocks * 8 groups in all

  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (live) v = *reinterpret_cast<const float4*>(x + row * x_stride + static_cast<int64_t>(gi) * 4);
  quantize_q8_1_quad(v, live, dst + row * dst_stride, blk, part);
}

}  // namespace

Status quantize_q8_1(const float* x, int64_t x_stride, int64_t cols, int64_t rows, void* dst, int64_t dst_stride,
                     Stream stream) {
  const auto fail = [](const std::string& what) { return Status::error("cuda: quantize_q8_1: " + what); };
  if (cols <= 0 || cols % 32 != 0) return fail("cols must be a positive multiple of 32, got " + std::to_string(cols));
  if (rows < 0 || rows > 65535) return fail("rows must be in [0, 65535], got " + std::to_string(rows));
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || x_stride % 4 != 0 || x_stride < cols)
    return fail("x must be 16-byte aligned with a stride of a multiple of 4 floats >= cols (stride " +
                std::to_string(x_stride) + ")");
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || dst_stride % 4 != 0 || dst_stride < q8_1_row_bytes(cols))
    return fail("dst must be 16-byte aligned with a stride of a multiple of 4 bytes >= " +
                std::to_string(q8_1_row_bytes(cols)) + " (stride " + std::to_string(dst_stride) + ")");
  if (rows == 0) return Status::ok_status();
  const int nblocks = static_cast<int>(cols / 32);
  const dim3 grid(static_cast<unsigned>((nblocks * 8 + kThreads - 1) / kThreads), static_cast<unsigned>(rows));
  STRATA_CUDA_TRY(launch_kernel(quantize_q8_1_kernel, grid, dim3(kThreads), 0, stream, x, x_stride, nblocks,
                                static_cast<uint8_t*>(dst), dst_stride));
  return Status::ok_status();
}

}  // namespace strata::cuda
