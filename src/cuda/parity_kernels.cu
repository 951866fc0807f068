// The parts of the parity harness that nvcc must compile: the host run of the device decoders and
// the tensor-core tile probe. Reporting and the reference arithmetic live in parity.cpp.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common.cuh"
#include "parity_internal.h"
#include "quant_decode.cuh"
#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"

namespace strata::cuda::parity_detail {
namespace {

using quant::Type;

template <Type T>
void decode_blocks_on_host(const uint8_t* blocks, int64_t n_blocks, float* y) {
  using Q = qd::Dec<T>;
  const qd::Tables tb = qd::host_tables();
  for (int64_t i = 0; i < n_blocks; ++i)
    for (int ch = 0; ch < Q::QK / 32; ++ch)
      for (int g = 0; g < 4; ++g) qd::dequant_group<T>(blocks + i * Q::TS, ch, g, tb, y + i * Q::QK + 32 * ch + 8 * g);
}

// Same lane -> element mapping as mmvq_decode_kernel: lane 4g+q holds elements 8q..8q+7 of A rows
// g and g+8 and of B column g.
__global__ void mma_tile_kernel(const int8_t* a, const int8_t* b, int32_t* c) {
  const int lane = threadIdx.x, g = lane >> 2, q = lane & 3;
  const auto word = [](const int8_t* p) {
    return static_cast<int>(static_cast<uint32_t>(static_cast<uint8_t>(p[0])) | (static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 8) |
                            (static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 16) | (static_cast<uint32_t>(static_cast<uint8_t>(p[3])) << 24));
  };
  const int af[4] = {word(a + g * 32 + 8 * q), word(a + (g + 8) * 32 + 8 * q), word(a + g * 32 + 8 * q + 4),
                     word(a + (g + 8) * 32 + 8 * q + 4)};
  const int bf[2] = {word(b + g * 32 + 8 * q), word(b + g * 32 + 8 * q + 4)};
  int acc[4] = {0, 0, 0, 0};
  mma_s8_16x8x32(acc, af, bf);
  c[g * 8 + 2 * q] = acc[0];
  c[g * 8 + 2 * q + 1] = acc[1];
  c[(g + 8) * 8 + 2 * q] = acc[2];
  c[(g + 8) * 8 + 2 * q + 1] = acc[3];
}

}  // namespace

std::vector<quant::Type> quant_kernel_types() {
  return {
#define STRATA_ENTRY(name) Type::name,
      STRATA_MMVQ_QUANT_TYPES(STRATA_ENTRY)
#undef STRATA_ENTRY
  };
}

Result<DecodeCheck> check_decoder_on_host(quant::Type type, uint64_t seed, int64_t n_blocks) {
  const auto info = quant::type_info(type);
  if (!info) return Status::error("parity: unknown type");
  std::vector<uint8_t> blocks(static_cast<size_t>(n_blocks * info->type_size));
  STRATA_TRY(quant::fill_random_blocks(type, seed, blocks.data(), n_blocks, 1.0f));
  const int64_t n = n_blocks * info->block_size;
  std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  STRATA_TRY(quant::dequantize_row(type, blocks.data(), want.data(), n));
  switch (type) {
#define STRATA_CASE(name) \
  case Type::name: decode_blocks_on_host<Type::name>(blocks.data(), n_blocks, got.data()); break;
    STRATA_MMVQ_QUANT_TYPES(STRATA_CASE)
#undef STRATA_CASE
    default:
      return Status::error("parity: no decoder for type " + std::string(info->name));
  }
  DecodeCheck r;
  r.type = type;
  r.elements = n;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[static_cast<size_t>(i)], &want[static_cast<size_t>(i)], 4) != 0) {
      if (r.mismatches++ == 0) {
        r.first_bad = i;
        r.got = got[static_cast<size_t>(i)];
        r.want = want[static_cast<size_t>(i)];
      }
    }
  }
  return r;
}

int64_t k_scale_words_mismatches_on_host(uint64_t seed, int64_t n_sets) {
  std::mt19937_64 rng(seed);
  int64_t bad = 0;
  for (int64_t i = 0; i < n_sets; ++i) {
    uint8_t S[12];
    for (uint8_t& b : S) b = static_cast<uint8_t>(rng());
    const auto word = [&](int at) {
      return static_cast<uint32_t>(S[at]) | (static_cast<uint32_t>(S[at + 1]) << 8) | (static_cast<uint32_t>(S[at + 2]) << 16) |
             (static_cast<uint32_t>(S[at + 3]) << 24);
    };
    for (int sb = 0; sb < 8; ++sb) {
      int sc = 0, m = 0;
      qd::scale_min_k4(S, sb, sc, m);
      uint32_t scw = 0, mnw = 0;
      qd::k_scale_min_words(word(0), word(4), word(8), sb >> 2, scw, mnw);
      const int shift = 8 * (sb & 3);
      if (static_cast<int>((scw >> shift) & 0xFFu) != sc || static_cast<int>((mnw >> shift) & 0xFFu) != m) ++bad;
    }
  }
  return bad;
}

Status mma_tile_on_device(const int8_t* a, const int8_t* b, int32_t* c) {
  int8_t* da = nullptr;
  int8_t* db = nullptr;
  int32_t* dc = nullptr;
  Status st;
  const auto run = [&]() -> Status {
    STRATA_CUDA_TRY(cudaMalloc(&da, 16 * 32));
    STRATA_CUDA_TRY(cudaMalloc(&db, 8 * 32));
    STRATA_CUDA_TRY(cudaMalloc(&dc, 16 * 8 * sizeof(int32_t)));
    STRATA_CUDA_TRY(cudaMemcpy(da, a, 16 * 32, cudaMemcpyHostToDevice));
    STRATA_CUDA_TRY(cudaMemcpy(db, b, 8 * 32, cudaMemcpyHostToDevice));
    STRATA_CUDA_TRY(cudaMemset(dc, 0xFF, 16 * 8 * sizeof(int32_t)));
    mma_tile_kernel<<<1, 32>>>(da, db, dc);
    STRATA_CUDA_TRY(cudaGetLastError());
    STRATA_CUDA_TRY(cudaMemcpy(c, dc, 16 * 8 * sizeof(int32_t), cudaMemcpyDeviceToHost));
    return Status::ok_status();
  };
  st = run();
  if (da) cudaFree(da);
  if (db) cudaFree(db);
  if (dc) cudaFree(dc);
  return st;
}

}  // namespace strata::cuda::parity_detail
