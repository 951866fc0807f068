// The forced token stream: ids drawn by a seeded PRNG over the whole vocab, the same on every
// machine and build, so two arms of a comparison process identical tokens without a trained
// model or a tokenizer. splitmix64 (the n-gram hash's mixer) and a multiply-shift range map:
// no libstdc++ distribution, whose output is not specified across versions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace strata::bench {

// count ids in [0, n_vocab), position i depending only on (seed, i).
std::vector<int32_t> forced_tokens(uint64_t seed, uint32_t n_vocab, int64_t count);

// FNV-1a 64 over the ids' little-endian bytes: a short fingerprint for reports.
uint64_t fnv1a(std::span<const int32_t> ids);

}  // namespace strata::bench
