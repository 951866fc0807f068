// get_rows: one thread per group of 8 elements, decoded with the same per-type helpers as mmvq
// (quant_decode.cuh) and turned into floats with the reference's operation order, so the output is
// the reference dequantizer's bit for bit. Rows are small (token embeddings, n-gram rows): the
// kernel reads the blocks straight from global memory and the grids from global copies.
#include "strata/cuda/get_rows.h"

#include <cstdint>
#include <string>

#include "common.cuh"
#include "launch.cuh"
#include "quant_decode.cuh"
#include "quant_tables.cuh"

namespace strata::cuda {
namespace {

using quant::Type;

constexpr int kThreads = 128;

template <Type T>
__global__ void __launch_bounds__(kThreads) get_rows_quant_kernel(const uint8_t* __restrict__ src, int64_t row_bytes,
                                                                  int64_t src_rows, int ngroups,
                                                                  const int32_t* __restrict__ ids,
                                                                  float* __restrict__ dst, int64_t dst_stride) {
  pdl_launch_dependents();
  pdl_wait();
  using Q = qd::Dec<T>;
  constexpr int kChunksPerBlock = Q::QK / 32;
  const int gi = blockIdx.x * kThreads + threadIdx.x;
  if (gi >= ngroups) return;
  const int64_t i = blockIdx.y;
  const int64_t id = ids[i];
  float y[8];
  if (id < 0 || id >= src_rows) {
    for (float& v : y) v = __int_as_float(0x7FC00000);
  } else {
    const int chunk = gi >> 2, g = gi & 3;
    const uint8_t* b = src + id * row_bytes + static_cast<int64_t>(chunk / kChunksPerBlock) * Q::TS;
    qd::dequant_group<T>(b, chunk % kChunksPerBlock, g, qd::tables_at<Q::kGrid>(qd::GridTable<Q::kGrid>::ptr()), y);
  }
  float4* out = reinterpret_cast<float4*>(dst + i * dst_stride + static_cast<int64_t>(gi) * 8);
  out[0] = make_float4(y[0], y[1], y[2], y[3]);
  out[1] = make_float4(y[4], y[5], y[6], y[7]);
}

// F32 / F16 / BF16: one thread per 4 elements.
template <Type T>
__global__ void __launch_bounds__(kThreads) get_rows_plain_kernel(const uint8_t* __restrict__ src, int64_t row_bytes,
                                                                  int64_t src_rows, int nquads,
                                                                  const int32_t* __restrict__ ids,
                                                                  float* __restrict__ dst, int64_t dst_stride) {
  pdl_launch_dependents();
  pdl_wait();
  const int qi = blockIdx.x * kThreads + threadIdx.x;
  if (qi >= nquads) return;
  const int64_t i = blockIdx.y;
  const int64_t id = ids[i];
  float y[4];
  if (id < 0 || id >= src_rows) {
    for (float& v : y) v = __int_as_float(0x7FC00000);
  } else {
    const uint8_t* p = src + id * row_bytes;
    for (int e = 0; e < 4; ++e) {
      const int j = qi * 4 + e;
      if constexpr (T == Type::F32) {
        y[e] = reinterpret_cast<const float*>(p)[j];
      } else if constexpr (T == Type::F16) {
        y[e] = qd::f16_bits_to_f32(reinterpret_cast<const uint16_t*>(p)[j]);
      } else {
        y[e] = __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[j]) << 16);
      }
    }
  }
  reinterpret_cast<float4*>(dst + i * dst_stride)[qi] = make_float4(y[0], y[1], y[2], y[3]);
}

template <Type T>
cudaError_t launch_get_rows(const GetRowsArgs& a, int64_t row_bytes, cudaStream_t stream) {
  const auto* src = static_cast<const uint8_t*>(a.src);
  if constexpr (T == Type::F32 || T == Type::F16 || T == Type::BF16) {
    const int nquads = static_cast<int>(a.cols / 4);
    const dim3 grid(static_cast<unsigned>((nquads + kThreads - 1) / kThreads), static_cast<unsigned>(a.n_ids));
    return launch_kernel(get_rows_plain_kernel<T>, grid, dim3(kThreads), 0, stream, src, row_bytes, a.src_rows, nquads,
                         a.ids, a.dst, a.dst_stride);
  } else {
    const int ngroups = static_cast<int>(a.cols / 8);
    const dim3 grid(static_cast<unsigned>((ngroups + kThreads - 1) / kThreads), static_cast<unsigned>(a.n_ids));
    return launch_kernel(get_rows_quant_kernel<T>, grid, dim3(kThreads), 0, stream, src, row_bytes, a.src_rows, ngroups,
                         a.ids, a.dst, a.dst_stride);
  }
}

}  // namespace

bool get_rows_supports(quant::Type type) {
  switch (type) {
#define STRATA_CASE(name) case Type::name:
    STRATA_MMVQ_QUANT_TYPES(STRATA_CASE)
#undef STRATA_CASE
    case Type::F32:
    case Type::F16:
    case Type::BF16:
      return true;
    default:
      return false;
  }
}

Status get_rows(const GetRowsArgs& a, Stream stream) {
  const auto fail = [](const std::string& what) { return Status::error("cuda: get_rows: " + what); };
  const auto info = quant::type_info(a.type);
  if (!info || !get_rows_supports(a.type))
    return fail("unsupported type id " + std::to_string(static_cast<uint32_t>(a.type)) +
                (info ? " (" + std::string(info->name) + ")" : std::string()));
  const int64_t block = info->block_size;
  if (a.cols <= 0 || a.cols % 32 != 0 || a.cols % block != 0)
    return fail(std::string(info->name) + ": cols must be a positive multiple of 32 and of " + std::to_string(block) +
                ", got " + std::to_string(a.cols));
  if (a.n_ids < 0 || a.n_ids > 65535) return fail("n_ids must be in [0, 65535], got " + std::to_string(a.n_ids));
  if (reinterpret_cast<uintptr_t>(a.dst) % 16 != 0 || a.dst_stride % 4 != 0 || a.dst_stride < a.cols)
    return fail("dst must be 16-byte aligned with a stride of a multiple of 4 floats >= cols (stride " +
                std::to_string(a.dst_stride) + ")");
  if (reinterpret_cast<uintptr_t>(a.src) % (a.type == Type::F32 ? 4 : 2) != 0) return fail("src is misaligned");
  if (a.n_ids == 0) return Status::ok_status();
  const int64_t row_bytes = a.cols / block * info->type_size;
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  cudaError_t err = cudaSuccess;
  switch (a.type) {
#define STRATA_CASE(name) \
  case Type::name: err = launch_get_rows<Type::name>(a, row_bytes, s); break;
    STRATA_MMVQ_QUANT_TYPES(STRATA_CASE)
    STRATA_CASE(F32)
    STRATA_CASE(F16)
    STRATA_CASE(BF16)
#undef STRATA_CASE
    default:
      return fail("no kernel for type " + std::string(info->name));
  }
  STRATA_CUDA_TRY(err);
  return Status::ok_status();
}

}  // namespace strata::cuda
