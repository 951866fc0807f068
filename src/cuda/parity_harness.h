// The parity harness's shared pieces (src/cuda/parity*.cpp): the reporter that prints one line
// per case and records it for --json, device buffers and their host <-> device copies, per-case
// seeds and random inputs, event timing, the float comparison and its verdict, and the entry
// point of every family's cases. Compiled by the host compiler; includes CUDA's runtime
// header for the buffers, copies, events and error macro only.
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

#include "launch.h"
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

// ---- host <-> device copies -------------------------------------------------------------------
//
// The copies and fills below run on the legacy default stream, where the cases launch their
// kernels (stream nullptr): the next launch there goes without PDL (launch.h), so that it waits
// for the copy in full, not only for the kernel before it.

// Allocates d for h and copies h in.
template <class T>
inline Status upload(DeviceBuffer& d, const std::vector<T>& h) {
  STRATA_TRY(d.alloc(h.size() * sizeof(T)));
  PARITY_CUDA(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  pdl_full_dependency_next(nullptr);
  return Status::ok_status();
}

// Copies h to the start of d, already allocated and at least as large; nothing when h is empty.
template <class T>
inline Status upload_into(DeviceBuffer& d, const std::vector<T>& h) {
  if (h.empty()) return Status::ok_status();
  PARITY_CUDA(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  pdl_full_dependency_next(nullptr);
  return Status::ok_status();
}

// Allocates `bytes` (DeviceBuffer::alloc's 16 when 0) with every byte set to `byte`. Outputs are
// poisoned so that an element the kernel skips shows: 0xFF makes every float NaN, 0x7F every
// int32 0x7F7F7F7F.
inline Status alloc_filled(DeviceBuffer& d, size_t bytes, int byte) {
  STRATA_TRY(d.alloc(bytes));
  PARITY_CUDA(cudaMemset(d.get(), byte, bytes == 0 ? 16 : bytes));
  pdl_full_dependency_next(nullptr);
  return Status::ok_status();
}

// n floats, every one NaN (all bits set).
inline Status alloc_poisoned(DeviceBuffer& d, size_t n) { return alloc_filled(d, n * sizeof(float), 0xFF); }

// Copies n elements from device address src into h (resized to n); nothing to copy when n is 0.
// No device-wide synchronisation: cudaMemcpy waits for the work of the default stream.
template <class T>
inline Status download(std::vector<T>& h, const void* src, size_t n) {
  h.resize(n);
  if (n == 0) return Status::ok_status();
  PARITY_CUDA(cudaMemcpy(h.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
  return Status::ok_status();
}

// Synchronises the device (a kernel's fault is reported here), then copies d's first n elements.
template <class T>
inline Status download_synced(std::vector<T>& h, const DeviceBuffer& d, size_t n) {
  PARITY_CUDA(cudaDeviceSynchronize());
  return download(h, d.get(), n);
}

// ---- timing --------------------------------------------------------------------------------------

// A pair of CUDA events destroyed on scope exit.
struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() = default;
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  ~Events() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

// Median milliseconds of `reps` (at least one) calls of launch() (a Status), each timed alone with
// events on `stream`; before() runs untimed ahead of each (an L2 flush, say). No warm-up.
template <class B, class F>
inline Result<double> median_event_ms(int reps, const B& before, const F& launch, cudaStream_t stream = nullptr) {
  Events ev;
  PARITY_CUDA(cudaEventCreate(&ev.start));
  PARITY_CUDA(cudaEventCreate(&ev.stop));
  std::vector<float> ms(static_cast<size_t>(std::max(reps, 1)));
  for (float& m : ms) {
    before();
    PARITY_CUDA(cudaEventRecord(ev.start, stream));
    STRATA_TRY(launch());
    PARITY_CUDA(cudaEventRecord(ev.stop, stream));
    PARITY_CUDA(cudaEventSynchronize(ev.stop));
    PARITY_CUDA(cudaEventElapsedTime(&m, ev.start, ev.stop));
  }
  std::sort(ms.begin(), ms.end());
  return static_cast<double>(ms[ms.size() / 2]);
}

// Median over `reps` timed launches after one warm-up.
template <class F>
inline Result<double> median_ms(int reps, const F& launch) {
  STRATA_TRY(launch());
  return median_event_ms(reps, [] {}, launch);
}

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

// A norm's weight: 1 + N(0, 0.1), as trained norms are.
inline std::vector<float> norm_weight(uint64_t seed, size_t n) {
  std::vector<float> w = random_normal(seed, n, 0.1f);
  for (float& v : w) v += 1.0f;
  return w;
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

inline CaseResult make_case(const std::string& op, const std::string& line, nlohmann::json params) {
  CaseResult r;
  r.op = op;
  r.line = line;
  r.params = std::move(params);
  return r;
}

// With opt.bench, times launch (median_ms) into r: metrics["ms"] and " ms=.." on the detail.
template <class F>
inline Status add_timing(const ParityOptions& opt, CaseResult& r, const F& launch) {
  if (!opt.bench) return Status::ok_status();
  auto ms = median_ms(opt.bench_reps, launch);
  if (!ms) return ms.status();
  r.metrics["ms"] = *ms;
  r.detail += fmt::format(" ms={:.4f}", *ms);
  return Status::ok_status();
}

class Reporter {
 public:
  explicit Reporter(const ParityOptions& opt) : opt_(opt) {}

  // True when the case runs; it then becomes the case in flight (named if the harness stops).
  bool wanted(const std::string& line) {
    if (!opt_.filter.empty() && line.find(opt_.filter) == std::string::npos) return false;
    if (opt_.shard_count > 1 && shard_of(line) != opt_.shard_index) return false;
    current_ = line;
    return true;
  }
  const std::string& current() const { return current_; }
  // FNV-1a of the case line: the shard a case belongs to depends on its line only.
  int shard_of(const std::string& line) const {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : line) h = (h ^ c) * 1099511628211ull;
    return static_cast<int>(h % static_cast<uint64_t>(opt_.shard_count));
  }

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

// The verdict of a float comparison against a relative bound: r's status (OK when every value is
// finite and d.rel <= tol), detail (d.text()) and metrics (rel, max_abs, tol). Returns whether OK.
inline bool judge(CaseResult& r, const Diff& d, double tol) {
  const bool ok = d.finite && d.rel <= tol;
  r.status = ok ? "OK" : "FAIL";
  r.detail = d.text();
  r.metrics = {{"rel", d.rel}, {"max_abs", d.max_abs}, {"tol", tol}};
  return ok;
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
