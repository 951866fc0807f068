// An unsigned key that orders like the float it encodes, for selections that compare bits: the
// QSA top-k's radix passes (attention.h's score_key) and the MoE router's warp reductions
// (route.cuh). Host and device, so the parity harness's host checks use the same mapping.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define STRATA_FLOAT_KEY_HD __host__ __device__
#else
#define STRATA_FLOAT_KEY_HD
#endif

namespace strata::cuda {

// Negative values flipped whole, the others with the sign bit set, so unsigned order is float
// order. -0 and +0 get different keys; callers keep -0 out of their candidates.
STRATA_FLOAT_KEY_HD inline uint32_t float_key(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The float a key encodes (float_key's inverse).
STRATA_FLOAT_KEY_HD inline float float_of_key(uint32_t key) {
  const uint32_t u = (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace strata::cuda
