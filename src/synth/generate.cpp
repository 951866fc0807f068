// Tensor contents: random valid blocks at a realistic magnitude, generated in fixed chunks so
// any byte range can be produced on its own (by a writer thread, or by a bench filling its
// expert arena) and always equals the same range of a written file.
//
// Magnitudes: quant::fill_random_blocks takes a block-level scale (the largest |value| of a
// block lands in about [scale/8, scale] depending on the type), not a standard deviation. The
// RMS that one unit of scale gives is measured once per type by generating and dequantizing
// a sample, so every type ends up with the std the plan asks for, whatever its code layout.
//
// Speed: fill_random_blocks decodes every block to place its scale (4-50 MB/s per core), far
// too slow for 50 GB. Projections therefore copy blocks drawn at random from a pool of
// kPoolBlocks blocks that fill_random_blocks made for that (type, std, seed): every block is
// still one the quant module vouches for, the value distribution is the same, and rows still
// differ (each block is an independent draw: 2048^10 possible 2560-wide IQ rows), at memcpy
// speed. Routers (a scale per row) and the small float tensors are generated directly.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "internal.h"
#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"
#include "strata/quant/scalar.h"

namespace strata::synth {

using quant::Type;

namespace detail {

// About 1 MiB of rows per chunk for 2-D tensors: big enough that per-call overhead vanishes,
// small enough that a partial range wastes little. 3-D expert tensors use one expert matrix
// per chunk, so a bench can generate a single expert exactly.
constexpr uint64_t kChunkTarget = uint64_t{1} << 20;

uint64_t chunk_rows(const TensorPlan& t) {
  const uint64_t rows = t.n_rows();
  if (t.init == Init::Router) return 1;  // each row has its own scale
  if (t.ne.size() >= 3) return static_cast<uint64_t>(t.ne[1]);
  return std::clamp<uint64_t>(kChunkTarget / std::max<uint64_t>(1, t.row_bytes()), 1, std::max<uint64_t>(1, rows));
}

uint64_t chunk_bytes(const TensorPlan& t) { return chunk_rows(t) * t.row_bytes(); }

}  // namespace detail

namespace {

using detail::Rng;

// RMS of the dequantized values of random blocks generated with scale 1 (memoized per type).
Result<double> rms_per_unit_scale(Type type) {
  static std::mutex mutex;
  static std::array<double, quant::kTypeCount> cache{};
  const auto id = static_cast<uint32_t>(type);
  std::lock_guard<std::mutex> lock(mutex);
  if (id < cache.size() && cache[id] > 0.0) return cache[id];
  const auto info = quant::type_info(type);
  if (!info || info->block_size == 0) return Status::error(fmt::format("synth: no block type {}", id));
  const int64_t n_blocks = std::max<int64_t>(64, 16384 / info->block_size);
  std::vector<uint8_t> blocks(static_cast<size_t>(n_blocks) * info->type_size);
  std::vector<float> values(static_cast<size_t>(n_blocks) * info->block_size);
  STRATA_TRY(quant::fill_random_blocks(type, 0x5CA1Eull, blocks.data(), n_blocks, 1.0f));
  STRATA_TRY(quant::dequantize_row(type, blocks.data(), values.data(), static_cast<int64_t>(values.size())));
  double sum = 0.0;
  for (float v : values) sum += static_cast<double>(v) * v;
  const double rms = std::sqrt(sum / static_cast<double>(values.size()));
  if (!(rms > 0.0) || !std::isfinite(rms)) {
    return Status::error(fmt::format("synth: random {} blocks have RMS {} at scale 1", info->name, rms));
  }
  if (id < cache.size()) cache[id] = rms;
  return rms;
}

uint64_t chunk_seed(const Plan& plan, const TensorPlan& t, uint64_t chunk) {
  return detail::splitmix64(detail::splitmix64(plan.options.seed ^ detail::hash_name(t.name)) + chunk);
}

constexpr int64_t kPoolBlocks = 2048;

// The pool of random valid blocks for (type, scale, seed), made once per process.
Result<std::shared_ptr<const std::vector<uint8_t>>> block_pool(Type type, float scale, uint64_t seed) {
  using Key = std::tuple<uint32_t, float, uint64_t>;
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const std::vector<uint8_t>>> pools;
  const Key key{static_cast<uint32_t>(type), scale, seed};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = pools.find(key); it != pools.end()) return it->second;
  }
  const auto info = *quant::type_info(type);
  const int64_t n_blocks = kPoolBlocks * (info.block_size == 1 ? 64 : 1);  // see pool_unit
  auto pool = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n_blocks) * info.type_size);
  const uint64_t pool_seed = detail::splitmix64(seed ^ (uint64_t{static_cast<uint32_t>(type)} << 32) ^
                                                std::bit_cast<uint32_t>(scale));
  STRATA_TRY(quant::fill_random_blocks(type, pool_seed, pool->data(), n_blocks, scale));
  std::lock_guard<std::mutex> lock(mutex);
  return pools.emplace(key, std::move(pool)).first->second;  // a racing thread's equal pool wins
}

// Fills n_bytes with units of unit_size bytes, each an independent draw from the pool.
Status fill_from_pool(Type type, float scale, const Plan& plan, uint64_t seed, uint64_t n_bytes, size_t unit_size,
                      uint8_t* dst) {
  auto pool = block_pool(type, scale, plan.options.seed);
  if (!pool) return pool.status();
  const uint8_t* src = (*pool)->data();
  const uint64_t n_units = (*pool)->size() / unit_size;
  Rng rng{seed};
  for (uint64_t off = 0; off < n_bytes; off += unit_size) {
    std::memcpy(dst + off, src + (rng.next() % n_units) * unit_size, unit_size);
  }
  return Status::ok_status();
}

// Bytes copied per pool draw: one block, or for the plain float types a run of 64 values
// (one value per draw would cost more in RNG than in copying).
size_t pool_unit(const TensorPlan& t, const quant::TypeInfo& info) {
  const bool plain = info.block_size == 1 && t.ne[0] % 64 == 0;
  return plain ? 64 * info.type_size : info.type_size;
}

Status store_floats(Type type, const std::vector<float>& v, uint8_t* dst) {
  switch (type) {
    case Type::F32: std::memcpy(dst, v.data(), v.size() * 4); return Status::ok_status();
    case Type::F16:
    case Type::BF16:
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = type == Type::F16 ? quant::fp32_to_fp16(v[i]) : quant::fp32_to_bf16(v[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return Status::ok_status();
    default: return Status::error("synth: small-tensor values need a float type");
  }
}

// Norms, conv taps, ssm_a and dt bias: values with a meaning, not just a magnitude.
Status fill_special(const TensorPlan& t, uint64_t seed, uint64_t n, uint8_t* dst) {
  Rng rng{seed};
  std::vector<float> v(n);
  for (float& x : v) {
    switch (t.init) {
      case Init::Norm: x = static_cast<float>(1.0 + rng.uniform(-0.05, 0.05)); break;
      case Init::SsmA: x = static_cast<float>(-std::exp(rng.uniform(0.0, std::log(16.0)))); break;
      case Init::SsmDt: {
        const double dt = std::exp(rng.uniform(std::log(1e-3), std::log(1e-1)));
        x = static_cast<float>(std::log(std::expm1(dt)));  // softplus(x) = dt
        break;
      }
      case Init::Conv: x = static_cast<float>(rng.uniform(-0.866, 0.866)); break;  // std 0.5
      default: x = 0.0f;
    }
  }
  return store_floats(t.type, v, dst);
}

// One chunk (rows [row0, row0 + n_rows)) into dst.
Status fill_chunk(const Plan& plan, const TensorPlan& t, uint64_t chunk, uint64_t row0, uint64_t n_rows,
                  const std::vector<float>& row_scales, uint8_t* dst) {
  const auto info = *quant::type_info(t.type);
  const uint64_t n = n_rows * static_cast<uint64_t>(t.ne[0]);
  const uint64_t seed = chunk_seed(plan, t, chunk);
  switch (t.init) {
    case Init::Zeros: std::memset(dst, 0, n / info.block_size * info.type_size); return Status::ok_status();
    case Init::Matrix:
    case Init::Router: {
      auto unit = rms_per_unit_scale(t.type);
      if (!unit) return unit.status();
      const float scale = t.std_dev / static_cast<float>(*unit);
      if (t.init == Init::Router) {
        const auto n_blocks = static_cast<int64_t>(n / info.block_size);
        return quant::fill_random_blocks(t.type, seed, dst, n_blocks, scale * row_scales.at(row0));
      }
      return fill_from_pool(t.type, scale, plan, seed, n / info.block_size * info.type_size, pool_unit(t, info), dst);
    }
    default: return fill_special(t, seed, n, dst);
  }
}

}  // namespace

ByteRange expert_range(const TensorPlan& t, int64_t expert) {
  if (t.ne.size() < 3 || expert < 0 || expert >= t.ne[2]) return {};
  const uint64_t size = detail::chunk_bytes(t);
  return {static_cast<uint64_t>(expert) * size, size};
}

Status generate(const Plan& plan, const TensorPlan& t, uint64_t offset, std::span<uint8_t> dst) {
  if (offset > t.nbytes || dst.size() > t.nbytes - offset) {
    return Status::error(fmt::format("synth: {}: bytes [{}, {}) outside the tensor's {} bytes", t.name, offset,
                                     offset + dst.size(), t.nbytes));
  }
  if (dst.empty()) return Status::ok_status();
  if (t.init == Init::Zeros) {
    std::memset(dst.data(), 0, dst.size());
    return Status::ok_status();
  }
  std::vector<float> row_scales;
  if (t.init == Init::Router) {
    row_scales = detail::router_scales(plan.options.seed, t.layer, static_cast<uint32_t>(t.n_rows()),
                                       plan.router_log_spread);
  }
  const uint64_t rows_per_chunk = detail::chunk_rows(t), row_bytes = t.row_bytes();
  const uint64_t chunk_size = rows_per_chunk * row_bytes, end = offset + dst.size();
  std::vector<uint8_t> scratch;
  for (uint64_t c = offset / chunk_size; c * chunk_size < end; ++c) {
    const uint64_t row0 = c * rows_per_chunk;
    const uint64_t n_rows = std::min(rows_per_chunk, t.n_rows() - row0);
    const uint64_t lo = c * chunk_size, hi = lo + n_rows * row_bytes;
    const uint64_t from = std::max(lo, offset), to = std::min(hi, end);
    uint8_t* out = dst.data() + (from - offset);
    if (from == lo && to == hi) {  // the whole chunk is wanted: generate in place
      STRATA_TRY(fill_chunk(plan, t, c, row0, n_rows, row_scales, out));
    } else {
      scratch.resize(hi - lo);
      STRATA_TRY(fill_chunk(plan, t, c, row0, n_rows, row_scales, scratch.data()));
      std::memcpy(out, scratch.data() + (from - lo), to - from);
    }
  }
  return Status::ok_status();
}

}  // namespace strata::synth
