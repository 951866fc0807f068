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
  // On by default since the contract holds in the compiled code (tools/pdl_audit.py, a ctest):
  // earlier runs with it on diverged because ptxas had moved a read-only load above a kernel's
  // wait, and because a launch after a copy or a stream join could start before them (launch.h).
  // It takes 4.3% off a T = 1 token on the H200 (5.026 against 5.249 ms in alternating rounds,
  // bench/results/2026-12-01-h200-pdl). STRATA_PDL=0 is the other arm.
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
