// Private pieces of the synth module: the released geometry, the per-recipe type choice,
// the metadata builder, the routing-skew calibration and the deterministic RNG they share.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/synth/synth.h"

namespace strata::synth::detail {

// ---------------------------------------------------------------------------------------
// The released geometry (spec/model.md §1, gguf-layout.md §2). A slice changes only the
// number of trunk blocks and of routed experts; every width stays as released so tensors
// keep their published block types and byte sizes.
// ---------------------------------------------------------------------------------------
inline constexpr int64_t kHidden = 2560;          // embedding_length
inline constexpr int64_t kHcCount = 4;            // hyper_connection.count
inline constexpr int64_t kWide = kHcCount * kHidden;
inline constexpr int64_t kHcRank = 320;           // hyper_connection.low_rank
inline constexpr int64_t kVocab = 248320;
inline constexpr int64_t kFfExp = 640;            // expert_feed_forward_length
inline constexpr int64_t kFfShexp = 640;          // expert_shared_feed_forward_length
inline constexpr uint32_t kMaxBlocks = 48;
inline constexpr uint32_t kMaxExperts = 512;
inline constexpr uint32_t kTopK = 10;             // expert_used_count
inline constexpr int64_t kHeads = 24, kHeadsKv = 2, kHeadDim = 256;
inline constexpr int64_t kGdnKHeads = 16, kGdnVHeads = 48, kGdnHeadDim = 128;
inline constexpr int64_t kGdnInner = kGdnVHeads * kGdnHeadDim;                      // 6144
inline constexpr int64_t kGdnConvDim = 2 * kGdnKHeads * kGdnHeadDim + kGdnInner;    // 10240
inline constexpr int64_t kConvKernel = 4;
inline constexpr int64_t kIdxHeads = 4, kIdxHeadDim = 128, kIdxTopK = 2048, kCompressRatio = 4;
inline constexpr uint32_t kAttnInterval = 4;      // full_attention_interval
inline constexpr int32_t kPleLayer = 1;           // ple.layers (0-based)
inline constexpr int64_t kPleRowDim = 160;        // embedding_length_per_layer_input
inline constexpr uint32_t kNgramSize = 3, kHeadsPerNgram = 8;
inline constexpr uint32_t kPleHeads = (kNgramSize - 1) * kHeadsPerNgram;          // 16
inline constexpr uint64_t kNgramVocabBase = 20000000;
inline constexpr uint64_t kNgramDivisible = 128;  // make_ngram_vocab_size_divisible_by
inline constexpr uint64_t kNgramSeed = 1234;
inline constexpr uint32_t kEosToken = 248044, kImageToken = 248056;
inline constexpr uint32_t kContext = 262144;

inline bool is_attention_block(uint32_t layer) { return (layer + 1) % kAttnInterval == 0; }

// ---------------------------------------------------------------------------------------
// Type choice (recipes.cpp)
// ---------------------------------------------------------------------------------------

// A tensor kind, as far as type choice cares. Norms, conv taps, ssm_a and dt bias are always
// F32 (the converter's rule, kept by every pack) and have no slot.
enum class Slot : uint8_t {
  TokenEmbd, Output, HcDown, HcUp, HcInject, Router, RouterShexp,
  GateExps, UpExps, DownExps, SharedExpert, GdnProj, SsmAlphaBeta, AttnProj, IndexerProj,
  PleKey, PleValue, NgramTable, NextnEh,
};

// The recipe's type for a slot in block `layer` (-1 for globals; mtp for the MTP block).
quant::Type recipe_type(const Options& opt, Slot slot, int32_t layer, bool mtp);

// llama-quantize's fallback when a row of ne0 elements is not a whole number of blocks
// (gguf-layout.md §5): the 640-wide down projections, the 320-wide HC ups, the 160-wide table.
quant::Type fit_row(quant::Type type, int64_t ne0);

// Layers whose routed down projections are IQ4_NL in a GSQ-RCO recipe (the rest Q2_0).
bool gsq_down_is_iq4nl(Recipe r, int32_t layer);

// Output file prefix, e.g. "Qwen3.8-Flash-Next-SYNTH-IQ3_XXS-4L-16E".
std::string file_prefix(const Options& opt);

// ---------------------------------------------------------------------------------------
// Metadata (metadata.cpp)
// ---------------------------------------------------------------------------------------

struct PleConstants {
  std::vector<uint64_t> multipliers;   // [ngram_size]
  std::vector<uint64_t> head_sizes;    // [16] prime moduli
  std::vector<uint64_t> head_offsets;  // [16]
  uint64_t table_rows = 0;             // sum of moduli rounded up to kNgramDivisible
};
const PleConstants& ple_constants();   // computed once (spec/model.md §5.1, Appendix A)

gguf::Metadata build_metadata(const Options& opt);

// Exact size of a GGUF file holding these keys and tensors (alignment 32), as the writer
// lays it out: header, keys, tensor infos padded to 32, then every tensor padded to 32.
uint64_t gguf_header_bytes(const gguf::Metadata& md, const std::vector<const TensorPlan*>& tensors,
                           uint32_t n_split_keys_shard, bool with_metadata);

// ---------------------------------------------------------------------------------------
// Routing skew (routing.cpp)
// ---------------------------------------------------------------------------------------

struct SkewCalibration {
  double log_spread = 0.0;  // sigma of the log-normal row scales
  double reached = 0.0;     // the skew that spread gives (population estimate)
};
// Finds the spread whose top-55% share matches `target` for n_experts, top-k.
SkewCalibration calibrate_skew(double target, uint32_t n_experts, uint32_t top_k);

// Scale of each expert's router row in one block: exp(spread * z), z the normal quantiles,
// permuted by a seeded shuffle so the popular experts differ per block.
std::vector<float> router_scales(uint64_t seed, int32_t layer, uint32_t n_experts, double spread);

// ---------------------------------------------------------------------------------------
// Chunks (generate.cpp): the unit of generation, one seed each
// ---------------------------------------------------------------------------------------
uint64_t chunk_rows(const TensorPlan& t);
uint64_t chunk_bytes(const TensorPlan& t);

// ---------------------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------------------

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t hash_name(std::string_view s) {  // FNV-1a: stable across platforms
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

struct Rng {
  uint64_t state;
  uint64_t next() { return splitmix64(state++ * 0x9E3779B97F4A7C15ull); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
  double normal();  // Box-Muller, one value per call
};

}  // namespace strata::synth::detail
