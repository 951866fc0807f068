#include "strata/bench/forced.h"

#include <cstring>

#include "strata/reference/ple.h"

namespace strata::bench {

std::vector<int32_t> forced_tokens(uint64_t seed, uint32_t n_vocab, int64_t count) {
  std::vector<int32_t> ids(count > 0 ? static_cast<size_t>(count) : 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    // splitmix64 of (seed, i): position i never depends on how many ids were asked for.
    const uint64_t r = reference::splitmix64(seed ^ reference::splitmix64(i));
    // Multiply-shift maps [0, 2^64) onto [0, n_vocab) with a bias below 2^-32 for any vocab.
    ids[i] = static_cast<int32_t>((static_cast<unsigned __int128>(r) * n_vocab) >> 64);
  }
  return ids;
}

uint64_t fnv1a(std::span<const int32_t> ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t id : ids) {
    uint8_t bytes[4];
    const uint32_t u = static_cast<uint32_t>(id);
    for (int k = 0; k < 4; ++k) bytes[k] = static_cast<uint8_t>(u >> (8 * k));
    for (uint8_t b : bytes) {
      h ^= b;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

}  // namespace strata::bench
