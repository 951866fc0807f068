// The parity harness's shared pieces (src/cuda/parity*.cpp): the reporter that prints one line
// per case and records it for --json, device buffers, per-case seeds and random inputs, and the
// entry point of every family's cases. Compiled by the host compiler; includes CUDA's runtime
// header for the buffer and error macro only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "strata/cuda/parity.h"
#include "strata/quant/types.h"

namespace strata::cuda {

#define PARITY_CUDA(call)                                                                    \
  do {                                                                                       \
    const cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess)                                                                   \
      return Status::error(fmt::format("parity: {} failed: {}", #call, cudaGetErrorString(e_))); \
  } while (0)

inline std::string type_name(quant::Type t) { return std::string(quant::type_info(t)->name); }

// A device allocation freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  Status alloc(size_t bytes) {
    reset();
    PARITY_CUDA(cudaMalloc(&p_, bytes == 0 ? 16 : bytes));
    bytes_ = bytes;
    return Status::ok_status();
  }
  void reset() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  template <class T = void>
  T* get() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Deterministic per-case seed: the run seed mixed with the case's text.
inline uint64_t case_seed(uint64_t seed, const std::string& name) {
  uint64_t h = seed ^ 0x9E3779B97F4A7C15ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

inline std::vector<float> random_normal(uint64_t seed, size_t n, float sigma = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs fn(begin, end) over [0, n) on all cores.
template <class F>
inline void parallel_for(int64_t n, F fn) {
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), (n + 63) / 64));
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < threads; ++i) {
    const int64_t b = n * i / threads, e = n * (i + 1) / threads;
    pool.emplace_back([=] { fn(b, e); });
  }
  for (auto& t : pool) t.join();
}

struct CaseResult {
  std::string line;  // "op(params)"
  std::string op;
  nlohmann::json params;
  std::string status;  // OK, FAIL, SKIP
  std::string detail;
  nlohmann::json metrics = nlohmann::json::object();
};

class Reporter {
 public:
  explicit Reporter(const ParityOptions& opt) : opt_(opt) {}

  // True when the case runs; it then becomes the case in flight (named if the harness stops).
  bool wanted(const std::string& line) {
    if (!opt_.filter.empty() && line.find(opt_.filter) == std::string::npos) return false;
    current_ = line;
    return true;
  }
  const std::string& current() const { return current_; }

  void add(CaseResult r) {
    std::string text = fmt::format("{}: {}", r.line, r.status);
    if (!r.detail.empty()) text += " " + r.detail;
    fmt::print("{}\n", text);
    std::fflush(stdout);
    if (r.status == "OK") ++summary_.passed;
    else if (r.status == "FAIL") { ++summary_.failed; failures_.push_back(text); }
    else ++summary_.skipped;
    nlohmann::json j = {{"case", r.line}, {"op", r.op}, {"params", r.params}, {"status", r.status}, {"detail", r.detail}};
    if (!r.metrics.empty()) j["metrics"] = r.metrics;
    cases_.push_back(std::move(j));
  }

  const ParitySummary& summary() const { return summary_; }
  const std::vector<std::string>& failures() const { return failures_; }
  nlohmann::json& cases() { return cases_; }

 private:
  const ParityOptions& opt_;
  std::string current_;
  ParitySummary summary_;
  std::vector<std::string> failures_;
  nlohmann::json cases_ = nlohmann::json::array();
};

// ||got - want||_2 / ||want||_2 (want all zero: ||got||), the largest |got - want|, and whether
// every got value is finite. The bound each case applies is in docs/PARITY.md.
struct Diff {
  double rel = 0.0;
  double max_abs = 0.0;
  bool finite = true;
  std::string text() const { return fmt::format("rel={:.1e} max_abs={:.1e}{}", rel, max_abs, finite ? "" : " non-finite"); }
};
inline Diff diff(const float* got, const float* want, size_t n) {
  Diff d;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) d.finite = false;
    const double e = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    num += e * e;
    den += static_cast<double>(want[i]) * want[i];
    d.max_abs = std::max(d.max_abs, std::fabs(e));
  }
  d.rel = den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
  if (!d.finite) d.rel = INFINITY;
  return d;
}

// Every family's cases (one file each: parity_<family>.cpp). An error return means the
// harness could not go on (a CUDA fault), not that a case failed.
Status run_hc_cases(const ParityOptions& opt, Reporter& rep);
Status run_gdn_cases(const ParityOptions& opt, Reporter& rep);
Status run_attention_cases(const ParityOptions& opt, Reporter& rep);
Status run_moe_cases(const ParityOptions& opt, Reporter& rep);
Status run_ple_cases(const ParityOptions& opt, Reporter& rep);
Status run_head_cases(const ParityOptions& opt, Reporter& rep);
Status run_decoder_cases(const ParityOptions& opt, Reporter& rep);

}  // namespace strata::cuda
