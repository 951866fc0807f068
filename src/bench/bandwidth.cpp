// Host read bandwidth: every thread streams its contiguous slice of one buffer, all threads
// start together (a barrier) and the pass ends when the slowest is done. The buffer is
// written first: untouched anonymous pages all map the one zero page, which sits in cache
// and would report a fantasy roof.
#include "strata/bench/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace strata::bench {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kAlign = 4096;
constexpr uint64_t kStride = 128;   // bytes per unrolled iteration of both loops

uint64_t read_scalar(const uint8_t* p, uint64_t n) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t a[8] = {};
  for (uint64_t i = 0; i < n / 8; i += 16) {
    for (int k = 0; k < 8; ++k) a[k] += w[i + k] ^ w[i + 8 + k];
  }
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

#if defined(__x86_64__)
// 32-byte loads, four independent accumulators: one core issues reads faster than DRAM
// delivers them, so the pass is bound by memory, not by this loop.
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, uint64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i < n; i += kStride) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
bool have_avx2() { return __builtin_cpu_supports("avx2"); }
#else
uint64_t read_avx2(const uint8_t* p, uint64_t n) { return read_scalar(p, n); }
bool have_avx2() { return false; }
#endif

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

}  // namespace

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n == 0) return 0.0;
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

uint64_t probe_buffer_bytes(const BandwidthOptions& o) {
  uint64_t bytes = o.bytes;
  if (bytes == 0) {
    const uint64_t llc = o.llc_bytes ? o.llc_bytes : 32 * kMiB;
    bytes = std::clamp<uint64_t>(4 * llc, 256 * kMiB, 2048 * kMiB);
  }
  return std::max<uint64_t>(bytes / kAlign * kAlign, kAlign);
}

Result<Bandwidth> measure_host_bandwidth(const BandwidthOptions& o) {
  Bandwidth bw;
  bw.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bw.buffer_bytes = probe_buffer_bytes(o);
  const bool avx2 = have_avx2();
  bw.kernel = avx2 ? "avx2" : "scalar";
  std::unique_ptr<uint8_t, FreeDeleter> buf(static_cast<uint8_t*>(std::aligned_alloc(kAlign, bw.buffer_bytes)));
  if (!buf) {
    return Status::error(fmt::format("strata bench: bandwidth probe: cannot allocate {} MiB", bw.buffer_bytes / kMiB));
  }

  const int t_count = bw.threads;
  const uint64_t slice = bw.buffer_bytes / t_count / kStride * kStride;
  std::atomic<uint64_t> sink{0};  // the sums land here, so no read loop is dead code
  std::barrier sync(t_count);
  const int total_passes = o.passes + 1;  // pass 0 warms up TLBs and the page tables
  std::vector<double> seconds;
  auto body = [&](int t) {
    uint8_t* mine = buf.get() + t * slice;
    // Non-constant content, written by the thread that reads it (first touch).
    for (uint64_t i = 0; i < slice; i += 8) {
      const uint64_t v = (i + t) * 0x9E3779B97F4A7C15ull;
      std::memcpy(mine + i, &v, 8);
    }
    for (int pass = 0; pass < total_passes; ++pass) {
      sync.arrive_and_wait();
      const auto t0 = std::chrono::steady_clock::now();
      const uint64_t s = avx2 ? read_avx2(mine, slice) : read_scalar(mine, slice);
      sink.fetch_add(s, std::memory_order_relaxed);
      sync.arrive_and_wait();
      if (t == 0 && pass > 0) seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < t_count; ++t) workers.emplace_back(body, t);
  body(0);
  for (auto& w : workers) w.join();

  const double read_bytes = static_cast<double>(slice) * t_count;
  for (double s : seconds) bw.passes_gb_s.push_back(read_bytes / s / 1e9);
  bw.gb_s = median(bw.passes_gb_s);
  return bw;
}

}  // namespace strata::bench
