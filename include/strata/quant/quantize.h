// Quantizers from binary32 (spec/quant-formats.md §5), bit-exact with ggml's scalar reference
// quantizers, and a generator of random valid blocks for synthetic weights and oracle tests.
#pragma once

#include <cstdint>

#include "strata/common/status.h"
#include "strata/quant/types.h"

namespace strata::quant {

// Q8_0, 34-byte blocks of 32 (activations for Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4/NVFP4/Q1_0/Q2_0, and
// also the reference weight quantizer for Q8_0: ggml uses the same routine for both).
// d = amax/127, q = roundf(x / d) computed as x * (1/d) (ties away from zero), d stored as f16.
// n must be a multiple of 32 (asserted); dst receives n/32 blocks.
void quantize_row_q8_0(const float* x, void* dst, int64_t n);

// Q8_1, 36-byte blocks of 32 (activations for Q4_1/Q5_1): as Q8_0 plus s = f16(sum(q) * d),
// both with the unrounded fp32 d. This is the CPU scalar reference, not CUDA's quantize_q8_1
// (whose s is the float sum of x).
void quantize_row_q8_1(const float* x, void* dst, int64_t n);

// Q8_K, 292-byte blocks of 256 (activations for the 256-element types on CPU): d is f32 and may be
// negative (the largest-magnitude element always maps to -127), q rounds half to even, bsums
// hold the 16-element sums of q. An all-zero block gets d = 0, q = 0 and bsums = 0 (ggml leaves
// bsums unwritten there; zero is their true value).
void quantize_row_q8_K(const float* x, void* dst, int64_t n);

// Dispatching form of the three above: fails, naming the type, for any other type or when n is
// negative or not a multiple of the block size.
Status quantize_row(Type type, const float* x, void* dst, int64_t n);

// Writes n_blocks random but valid blocks of any type with has_dequantizer(type) (F32/F16/BF16:
// n_blocks single values). Deterministic in (type, seed, n_blocks, scale) on every platform.
//
// `scale` (> 0, finite) sets the magnitude of the *dequantized* values: each block's scale
// fields (f16 d/dmin/m, Q8_K's f32 d, MXFP4's E8M0 byte, NVFP4's UE4M3 bytes, IQ1_M's split f16)
// are chosen so that the block's largest |value| lies in about [scale/8, scale]; plain types get
// values uniform in (-scale, scale). Codes, sub-scales and grid indices are uniformly random;
// derived fields are made consistent (Q8_1's s, Q8_K's bsums), TQ1_0 bytes are proper base-3
// packings and TQ2_0 codes stay in 0..2, as ggml's quantizers write them. Every f16 field is
// finite; for very small scales (below about 1e-4) d can land in the f16 subnormal range and
// lose precision, but stays finite. Fails for a type without a dequantizer, n_blocks < 0 or a
// scale that is not finite and positive.
Status fill_random_blocks(Type type, uint64_t seed, void* dst, int64_t n_blocks, float scale);

}  // namespace strata::quant
