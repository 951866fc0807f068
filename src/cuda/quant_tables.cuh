// Device copies of the lattice grids (generated strata/quant/tables_data.h, never retyped).
// Built at compile time from the host constexpr arrays. `static`: without relocatable device code
// every .cu that reads a table needs its own copy; only get_rows.cu and the mmvq instances do.
#pragma once

#include <cstdint>

#include "quant_decode.cuh"

namespace strata::cuda::qd {

// 16-byte aligned: mmvq copies a table into shared memory with 16-byte loads.
template <class E, int N>
struct alignas(16) DeviceTable {
  E v[N];
};

template <class E, int N>
constexpr DeviceTable<E, N> copy_table(const E (&a)[N]) {
  DeviceTable<E, N> r{};
  for (int i = 0; i < N; ++i) r.v[i] = a[i];
  return r;
}

static __device__ const DeviceTable<uint64_t, 256> d_iq2xxs_grid = copy_table(quant::iq2xxs_grid);
static __device__ const DeviceTable<uint64_t, 512> d_iq2xs_grid = copy_table(quant::iq2xs_grid);
static __device__ const DeviceTable<uint64_t, 1024> d_iq2s_grid = copy_table(quant::iq2s_grid);
static __device__ const DeviceTable<uint32_t, 256> d_iq3xxs_grid = copy_table(quant::iq3xxs_grid);
static __device__ const DeviceTable<uint32_t, 512> d_iq3s_grid = copy_table(quant::iq3s_grid);
static __device__ const DeviceTable<uint32_t, 2048> d_iq1s_grid_gpu = copy_table(quant::iq1s_grid_gpu);

// The global-memory table a grid kind names, and its size in bytes (0 for Grid::None).
template <Grid G>
struct GridTable {
  static constexpr int kBytes = 0;
  __device__ static const void* ptr() { return nullptr; }
};
template <>
struct GridTable<Grid::Iq2xxs> {
  static constexpr int kBytes = sizeof(d_iq2xxs_grid);
  __device__ static const void* ptr() { return d_iq2xxs_grid.v; }
};
template <>
struct GridTable<Grid::Iq2xs> {
  static constexpr int kBytes = sizeof(d_iq2xs_grid);
  __device__ static const void* ptr() { return d_iq2xs_grid.v; }
};
template <>
struct GridTable<Grid::Iq2s> {
  static constexpr int kBytes = sizeof(d_iq2s_grid);
  __device__ static const void* ptr() { return d_iq2s_grid.v; }
};
template <>
struct GridTable<Grid::Iq3xxs> {
  static constexpr int kBytes = sizeof(d_iq3xxs_grid);
  __device__ static const void* ptr() { return d_iq3xxs_grid.v; }
};
template <>
struct GridTable<Grid::Iq3s> {
  static constexpr int kBytes = sizeof(d_iq3s_grid);
  __device__ static const void* ptr() { return d_iq3s_grid.v; }
};
template <>
struct GridTable<Grid::Iq1s> {
  static constexpr int kBytes = sizeof(d_iq1s_grid_gpu);
  __device__ static const void* ptr() { return d_iq1s_grid_gpu.v; }
};

// A Tables whose one used pointer is `p` (global or shared copy of the type's grid).
template <Grid G>
__device__ __forceinline__ Tables tables_at(const void* p) {
  Tables t;
  if constexpr (G == Grid::Iq2xxs) t.iq2xxs = static_cast<const uint64_t*>(p);
  if constexpr (G == Grid::Iq2xs) t.iq2xs = static_cast<const uint64_t*>(p);
  if constexpr (G == Grid::Iq2s) t.iq2s = static_cast<const uint64_t*>(p);
  if constexpr (G == Grid::Iq3xxs) t.iq3xxs = static_cast<const uint32_t*>(p);
  if constexpr (G == Grid::Iq3s) t.iq3s = static_cast<const uint32_t*>(p);
  if constexpr (G == Grid::Iq1s) t.iq1s = static_cast<const uint32_t*>(p);
  return t;
}

}  // namespace strata::cuda::qd
