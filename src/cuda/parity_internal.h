// Internal to src/cuda: device-side pieces of the parity harness that must be compiled by nvcc
// (parity.cpp, compiled by the host compiler, calls them). Host-only header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/quant/types.h"

namespace strata::cuda::parity_detail {

// The quantized types the kernels take, in the order the harness reports them.
std::vector<quant::Type> quant_kernel_types();

// Host run of the per-type group decoders (the device code path of quant_decode.cuh, compiled for
// the host) on n_blocks random blocks, compared bit for bit with quant::dequantize_row.
struct DecodeCheck {
  quant::Type type{};
  int64_t elements = 0;
  int64_t mismatches = 0;
  int64_t first_bad = -1;     // element index of the first mismatch
  float got = 0, want = 0;    // at first_bad
};
Result<DecodeCheck> check_decoder_on_host(quant::Type type, uint64_t seed, int64_t n_blocks);

// Host run of qd::k_scale_min_words (the K types' scale words of mmvq_direct_kernel and
// mmvq_mma_kernel) on n_sets random 12-byte scale sets: the sub-blocks whose scale or min differs
// from qd::scale_min_k4's, the byte-wise decoder the host check above proves against dequantize_row.
int64_t k_scale_words_mismatches_on_host(uint64_t seed, int64_t n_sets);

// Runs the int8 tensor-core tile wrapper used by mmvq (with mmvq's lane-to-element mapping) on
// A (16 x 32, row-major int8) and B (8 x 32: row t holds column t) and returns C (16 x 8, row-major).
Status mma_tile_on_device(const int8_t* a, const int8_t* b, int32_t* c);

}  // namespace strata::cuda::parity_detail
