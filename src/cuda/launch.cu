// pdl_enabled(), the full-dependency marks (launch.h) and the per-device capability check the
// launch helpers share (launch.cuh).
#include <algorithm>
#include <mutex>
#include <vector>

#include "launch.cuh"
#include "strata/cuda/switches.h"

namespace strata::cuda {

bool device_cc_major_at_least(int major) {
  static std::mutex mu;
  static std::vector<int> cc_major;  // by device id; -1 not asked yet
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(cc_major.size()) <= device) cc_major.resize(static_cast<size_t>(device) + 1, -1);
  int& known = cc_major[static_cast<size_t>(device)];
  if (known < 0 && cudaDeviceGetAttribute(&known, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) known = 0;
  return known >= major;
}

bool pdl_enabled() {
  // Read once: flipping it between a graph's capture and its replay would not change the graph.
  // Off unless asked for: with it on, the decoder's 128-token greedy check on the H200
  // (2026-11-30) diverged from the reference at a different token on each run while every
  // kernel case passed; an audit of every kernel then found none that breaks launch.cuh's
  // contract, and the launches after copies and stream joins (launch.h) go without the attribute
  // since (not yet measured with it on). It bought 1.5% then (8.02 against 8.15 ms per token, bench/results/2026-11-30-h200-fusion) and
  // costs 1.1% since the direct mat-vec (7.28 against 7.20, ...-h200-direct-mmvq).
  static const bool env_allows = switches().pdl;
  return env_allows && device_cc_major_at_least(9);
}

namespace {

// The streams whose next launch from this thread goes without the PDL attribute (few: the
// decoder's main, side and copy streams).
thread_local std::vector<cudaStream_t> full_dependency_next;

}  // namespace

void pdl_full_dependency_next(cudaStream_t stream) {
  if (!pdl_enabled()) return;
  if (std::find(full_dependency_next.begin(), full_dependency_next.end(), stream) == full_dependency_next.end())
    full_dependency_next.push_back(stream);
}

bool pdl_launch_allowed(cudaStream_t stream) {
  if (!pdl_enabled()) return false;
  const auto it = std::find(full_dependency_next.begin(), full_dependency_next.end(), stream);
  if (it == full_dependency_next.end()) return true;
  full_dependency_next.erase(it);
  return false;
}

}  // namespace strata::cuda
