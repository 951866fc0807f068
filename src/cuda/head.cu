// The head's tail (head.h): argmax and the sampler of engine::Sampler, one CTA per row.
//
// argmax_rows: a cluster of 8 CTAs per row (one CTA below sm_90), each thread scanning a strided
// slice, then (value desc, index asc) reduces the CTA and the cluster; that order is total, so
// the winner does not depend on the reduction's shape.
//
// sample_rows, for a row of n logits and k = top_k candidates (k <= kMaxSampleTopK):
//   1. the candidates: the fast path bounds the k-th largest logit from below by the k-th largest
//      of the 1024 threads' slice maxima, pools every logit at or above that floor in shared
//      memory and selects the top k there; when the pool would overflow (huge ties) or fewer
//      than k slices hold a finite logit, a radix select over the row (8 bits a pass on an
//      order-preserving u32 key, then over the tied ids if only part of a tie fits) finds them
//   2. a bitonic sort on (key, ~id) puts the k candidates in rank order (logit desc, id asc,
//      the CPU's), so nothing depends on the order in which they were appended
//   3. thread 0 runs engine::Sampler's arithmetic in double on the ranked candidates:
//      softmax, top-p cumulative in rank order, min-p, then the walk in ascending id with u.
// Everything lives in the CTA's shared memory: the sampler needs no global scratch.
// Sums in step 3 run in rank order. The CPU sums the softmax and the min-p mass in the order its
// nth_element leaves (unspecified), so the two can differ in the last bit of a double; the
// chosen token differs only if u falls within that rounding of a cumulative boundary.
#include "head.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include <cooperative_groups.h>

#include "common.cuh"
#include "float_key.h"
#include "launch.cuh"

namespace strata::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kArgmaxThreads = 1024;
constexpr int kSampleThreads = kMaxSampleTopK;  // the sorts give each thread one candidate
constexpr unsigned kFullMask = 0xffffffffu;
constexpr uint64_t kEmpty = ~uint64_t{0};  // sorts after every real entry

// One CTA reads a whole row, so each thread keeps several loads in flight: with one at a time a
// pass over a row is bound by memory latency rather than by the SM's bandwidth.
constexpr int kLoadsInFlight = 8;
constexpr int64_t kSweep = int64_t{kLoadsInFlight} * kSampleThreads;  // elements per sweep of a sampling CTA
// Candidates of the fast path kept in dynamic shared memory (128 KiB of u64 keys). For a row of
// 248320 normal-like logits the floor admits roughly 5% of them at k = 1024 and a few hundred at
// k = 40 (estimates); a row that overflows takes the general path.
constexpr int kPoolCapacity = 16384;
constexpr size_t kPoolBytes = kPoolCapacity * sizeof(uint64_t);

// v[u] = row[i0 + u * kThreads + thread] (NaN past the end), all loads issued first.
template <int kThreads>
__device__ __forceinline__ void load_sweep(const float* __restrict__ row, int64_t n, int64_t i0,
                                           float (&v)[kLoadsInFlight]) {
#pragma unroll
  for (int u = 0; u < kLoadsInFlight; ++u) {
    const int64_t i = i0 + u * kThreads + threadIdx.x;
    v[u] = i < n ? row[i] : __int_as_float(0x7FC00000);
  }
}

// ---- argmax -----------------------------------------------------------------------------------

struct Best {
  float value;
  int32_t index;  // < 0: nothing finite seen
};

// The better of two: a finite value beats none, the larger value wins, equal values (also
// -0 and +0) go to the lower index, as engine::argmax.
__device__ __forceinline__ Best better(Best a, Best b) {
  if (b.index < 0) return a;
  if (a.index < 0) return b;
  if (a.value != b.value) return a.value > b.value ? a : b;
  return a.index < b.index ? a : b;
}

__device__ __forceinline__ Best warp_best(Best b) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Best other{__shfl_xor_sync(kFullMask, b.value, offset), __shfl_xor_sync(kFullMask, b.index, offset)};
    b = better(b, other);
  }
  return b;
}

// The best finite logit of row[lo, hi) by this CTA, in thread 0. A thread's indices rise, so a
// strict > keeps its lowest index among equals.
__device__ Best cta_best(const float* __restrict__ row, int64_t lo, int64_t hi, Best* warps) {
  Best b{0.0f, -1};
  for (int64_t i0 = lo; i0 < hi; i0 += int64_t{kLoadsInFlight} * kArgmaxThreads) {
    float v[kLoadsInFlight];
    load_sweep<kArgmaxThreads>(row, hi, i0, v);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t i = i0 + u * kArgmaxThreads + threadIdx.x;
      if (i < hi && isfinite(v[u]) && (b.index < 0 || v[u] > b.value)) b = Best{v[u], static_cast<int32_t>(i)};
    }
  }
  b = warp_best(b);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = b;
  __syncthreads();
  if (threadIdx.x < 32) b = warp_best(warps[threadIdx.x]);
  return b;
}

// One CTA per row (devices without thread-block clusters).
__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(const float* __restrict__ logits, int64_t n,
                                                                int32_t* __restrict__ out) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ Best warps[kArgmaxThreads / 32];
  const Best b = cta_best(logits + static_cast<int64_t>(blockIdx.x) * n, 0, n, warps);
  if (threadIdx.x == 0) out[blockIdx.x] = b.index;
}

// A cluster of kArgmaxCluster CTAs per row (grid (kArgmaxCluster, T)): rank r scans the r-th
// slice, so a row takes an eighth of the memory round trips one CTA needs (a 248320-logit row:
// ~32 us on one SM of the H200); each other rank pushes its best into rank 0's shared memory by
// st.async, counted on an mbarrier of rank 0 (common.cuh's cluster_push), and rank 0 reduces them.
constexpr int kArgmaxCluster = 8;

__global__ void __launch_bounds__(kArgmaxThreads) argmax_cluster_kernel(const float* __restrict__ logits, int64_t n,
                                                                        int32_t* __restrict__ out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // clusters need sm_90; argmax_rows launches argmax_kernel below that
#else
  __shared__ Best warps[kArgmaxThreads / 32];
  __shared__ Best ranks[kArgmaxCluster];  // rank 0's: each rank's best
  __shared__ uint64_t ranks_bar;          // rank 0's: counts the bytes pushed into ranks
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  if (rank == 0 && threadIdx.x == 0) cluster_push_init(&ranks_bar, (kArgmaxCluster - 1) * sizeof(Best));
  cluster_arrive_relaxed();  // phase 1
  pdl_launch_dependents();
  pdl_wait();
  const int64_t span = (n + kArgmaxCluster - 1) / kArgmaxCluster;
  const int64_t lo = rank * span, hi = lo + span < n ? lo + span : n;
  const Best b = cta_best(logits + static_cast<int64_t>(blockIdx.y) * n, lo, hi, warps);
  cluster_wait_acquire();  // phase 1: every rank has started, rank 0's ranks_bar is armed
  if (threadIdx.x == 0) {
    if (rank == 0) {
      ranks[0] = b;
    } else {
      const unsigned dst = cluster_rank_addr(&ranks[rank], 0), bar = cluster_rank_addr(&ranks_bar, 0);
      static_assert(sizeof(Best) == 8 && offsetof(Best, index) == 4, "a Best is pushed as two words");
      cluster_push(dst, b.value, bar);
      cluster_push(dst + 4, __int_as_float(b.index), bar);
    }
  }
  if (rank != 0) return;
  cluster_push_wait(&ranks_bar);  // the other ranks' bests are in
  __syncthreads();                // and this rank's, stored by thread 0
  if (threadIdx.x < 32) {
    const Best r = warp_best(threadIdx.x < kArgmaxCluster ? ranks[threadIdx.x] : Best{0.0f, -1});
    if (threadIdx.x == 0) out[blockIdx.y] = r.index;
  }
#endif
}

// ---- sampling ---------------------------------------------------------------------------------

// float_key (float_key.h), except that -0 takes +0's key because the CPU compares them equal (a
// tie, broken by id). Every finite key is >= 0x00800000, so key 0 lies below all of them.
__device__ __forceinline__ uint32_t order_key(float v) { return float_key(v == 0.0f ? 0.0f : v); }

struct SampleShared {
  uint64_t keys[kMaxSampleTopK];   // sort keys: rank order, then (id, position) for the walk
  double prob[kMaxSampleTopK];     // by rank position
  int32_t ids[kMaxSampleTopK];     // by rank position
  unsigned char alive[kMaxSampleTopK];
  int hist[256];
  int count;
  int digit, rank, digit_count, total;
  int keep;
  double scalar;
};

// hist[d] = how many admitted keys match `prefix` under `mask` and have digit d at `shift`.
// key_of(i, logit, key) says whether element i takes part and gives its key. Lanes that hit the
// same bin add once: logits share a few exponents, so a plain atomic per lane would serialise.
template <class KeyOf>
__device__ void radix_histogram(const float* __restrict__ row, int64_t n, const KeyOf& key_of, uint32_t prefix,
                                uint32_t mask, int shift, int* hist) {
  for (int b = threadIdx.x; b < 256; b += kSampleThreads) hist[b] = 0;
  __syncthreads();
  // i0 is the same for every lane, so the whole warp reaches __match_any_sync together.
  for (int64_t i0 = 0; i0 < n; i0 += kSweep) {
    float v[kLoadsInFlight];
    load_sweep<kSampleThreads>(row, n, i0, v);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t i = i0 + u * kSampleThreads + threadIdx.x;
      uint32_t key = 0;
      const bool in = i < n && key_of(i, v[u], key) && (key & mask) == prefix;
      const int bin = in ? static_cast<int>((key >> shift) & 0xFFu) : 256;
      const unsigned peers = __match_any_sync(kFullMask, bin);
      if (in && static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1) atomicAdd(&hist[bin], __popc(peers));
    }
  }
  __syncthreads();
}

// Warp 0 finds the digit that holds the k-th largest counted key: the d with
// (count above d) < k <= (count above d) + hist[d], into sh.digit / rank (k's place inside d) /
// digit_count, and the count of all keys into sh.total. The caller's barrier publishes them.
// When k exceeds the total no digit is written.
__device__ void pick_digit(SampleShared& sh, int k) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const int top = 255 - 8 * lane;  // lane l covers digits top .. top - 7, lane 0 the highest
  int count = 0;
  for (int b = 0; b < 8; ++b) count += sh.hist[top - b];
  int through = count;  // keys in digits >= top - 7: an inclusive scan over the lanes
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int t = __shfl_up_sync(kFullMask, through, offset);
    if (lane >= offset) through += t;
  }
  if (lane == 31) sh.total = through;
  const int above = through - count;
  if (above < k && k <= through) {  // exactly one lane
    int a = above, d = top;
    for (int b = 0; b < 7 && a + sh.hist[d] < k; ++b, --d) a += sh.hist[d];
    sh.digit = d;
    sh.rank = k - a;
    sh.digit_count = sh.hist[d];
  }
}

struct Selected {
  uint32_t key;   // the k-th largest admitted key
  int rank;       // its 1-based place among the admitted keys equal to it
  int ties;       // how many admitted keys equal it
  int admitted;   // how many keys took part (counted in the first pass)
};

// The k-th largest admitted key (1 <= k), most significant digit first. When fewer than k keys
// take part, `admitted` says so and the other fields are meaningless.
template <class KeyOf>
__device__ Selected select_kth_largest(const float* __restrict__ row, int64_t n, const KeyOf& key_of, int k,
                                       SampleShared& sh) {
  uint32_t prefix = 0, mask = 0;
  Selected sel{0, 0, 0, 0};
  for (int shift = 24; shift >= 0; shift -= 8) {
    radix_histogram(row, n, key_of, prefix, mask, shift, sh.hist);
    pick_digit(sh, k);
    __syncthreads();
    // Warp 0 rewrites these only after the next pass's two barriers, which every thread
    // reaches after reading them here.
    if (shift == 24) {
      sel.admitted = sh.total;
      if (sel.admitted <= k) return sel;
    }
    prefix |= static_cast<uint32_t>(sh.digit) << shift;
    mask |= 0xFFu << shift;
    k = sh.rank;
    sel.ties = sh.digit_count;
  }
  sel.key = prefix;
  sel.rank = k;
  return sel;
}

// A bitonic sort of kMaxSampleTopK keys, ascending; thread i owns position i.
__device__ void sort_ascending(uint64_t* a) {
  const int i = threadIdx.x;
  for (int size = 2; size <= kMaxSampleTopK; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      const int j = i ^ stride;
      if (j > i) {
        const bool up = (i & size) == 0;
        const uint64_t x = a[i], y = a[j];
        if ((x > y) == up) {
          a[i] = y;
          a[j] = x;
        }
      }
      __syncthreads();
    }
  }
}

struct SampleArgs {
  int64_t n;
  int k;  // candidates wanted, 1 .. kMaxSampleTopK
  float temperature, top_p, min_p;
};

// Rank key of a candidate: ascending order of ~(key, ~id) is logit desc, id asc.
__device__ __forceinline__ uint64_t candidate_key(uint32_t key, int64_t i) {
  return (static_cast<uint64_t>(key) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(i));
}

// The general path: radix select over the whole row (4 passes, 4 more when the k-th logit is
// tied and only part of the tie fits), then one pass appends the k candidates' rank keys to
// sh.keys and their number to sh.count.
__device__ void gather_by_radix(const float* __restrict__ row, const SampleArgs& p, SampleShared& sh) {
  const int64_t n = p.n;
  const auto logit_key = [](int64_t, float v, uint32_t& key) {
    if (!isfinite(v)) return false;
    key = order_key(v);
    return true;
  };
  const Selected sel = select_kth_largest(row, n, logit_key, p.k, sh);
  // Taken: key > cut_key, or key == cut_key and id <= cut_id. Fewer finite logits than k: all.
  uint32_t cut_key = 0;
  int64_t cut_id = -1;
  if (sel.admitted > p.k) {
    cut_key = sel.key;
    cut_id = n - 1;
    if (sel.ties > sel.rank) {
      // Only the `rank` lowest ids of the tie fit: the rank-th largest of ~id among them.
      const uint32_t tied = sel.key;
      const auto id_key = [tied](int64_t i, float v, uint32_t& key) {
        if (!isfinite(v) || order_key(v) != tied) return false;
        key = ~static_cast<uint32_t>(i);
        return true;
      };
      cut_id = ~select_kth_largest(row, n, id_key, sel.rank, sh).key;
    }
  }

  // The selects' last reads of the shared scalars happen before this barrier.
  __syncthreads();
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  for (int64_t i0 = 0; i0 < n; i0 += kSweep) {
    float v[kLoadsInFlight];
    load_sweep<kSampleThreads>(row, n, i0, v);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t i = i0 + u * kSampleThreads + threadIdx.x;
      bool take = false;
      uint64_t rank_key = 0;
      if (i < n && isfinite(v[u])) {
        const uint32_t key = order_key(v[u]);
        take = key > cut_key || (key == cut_key && i <= cut_id);
        rank_key = ~candidate_key(key, i);
      }
      const unsigned taking = __ballot_sync(kFullMask, take);
      int base = 0;
      if (lane == 0 && taking != 0) base = atomicAdd(&sh.count, __popc(taking));
      base = __shfl_sync(kFullMask, base, 0);
      const int pos = base + __popc(taking & ((1u << lane) - 1u));
      if (take && pos < kMaxSampleTopK) sh.keys[pos] = rank_key;
    }
  }
}

// The k-th largest of cnt distinct u64 keys in shared memory (k <= cnt), 8 bits a pass.
__device__ uint64_t pool_kth_largest(const uint64_t* pool, int cnt, int k, SampleShared& sh) {
  uint64_t prefix = 0, mask = 0;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kSampleThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int j = threadIdx.x; j < cnt; j += kSampleThreads) {
      const uint64_t key = pool[j];
      if ((key & mask) == prefix) atomicAdd(&sh.hist[static_cast<int>((key >> shift) & 0xFFu)], 1);
    }
    __syncthreads();
    pick_digit(sh, k);
    __syncthreads();
    prefix |= static_cast<uint64_t>(sh.digit) << shift;
    mask |= uint64_t{0xFF} << shift;
    k = sh.rank;
  }
  return prefix;
}

// The fast path, two passes over the row. Each thread's slice maximum is a distinct element, so
// the k-th largest of the 1024 slice maxima bounds the k-th largest logit from below: every
// candidate has a key >= that floor. Those elements (few for real logits) go to the shared pool,
// where the exact top k is selected on (key, ~id), unique per element, so ties need no extra
// pass. Returns false (nothing written) when fewer than k slices hold a finite logit or the
// pool overflows; the caller then takes the general path.
__device__ bool gather_from_pool(const float* __restrict__ row, const SampleArgs& p, SampleShared& sh,
                                 uint64_t* pool) {
  const int64_t n = p.n;
  uint32_t best = 0;
  for (int64_t i0 = 0; i0 < n; i0 += kSweep) {
    float v[kLoadsInFlight];
    load_sweep<kSampleThreads>(row, n, i0, v);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (isfinite(v[u])) best = max(best, order_key(v[u]));  // past the end v[u] is NaN
  }
  sh.keys[threadIdx.x] = best;
  __syncthreads();
  sort_ascending(sh.keys);
  const uint32_t floor_key = static_cast<uint32_t>(sh.keys[kMaxSampleTopK - p.k]);
  if (floor_key == 0) return false;  // every thread read the same value: a uniform exit

  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  for (int64_t i0 = 0; i0 < n; i0 += kSweep) {
    float v[kLoadsInFlight];
    load_sweep<kSampleThreads>(row, n, i0, v);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t i = i0 + u * kSampleThreads + threadIdx.x;
      const bool take = isfinite(v[u]) && order_key(v[u]) >= floor_key;
      const unsigned taking = __ballot_sync(kFullMask, take);
      int base = 0;
      if (lane == 0 && taking != 0) base = atomicAdd(&sh.count, __popc(taking));
      base = __shfl_sync(kFullMask, base, 0);
      const int pos = base + __popc(taking & ((1u << lane) - 1u));
      if (take && pos < kPoolCapacity) pool[pos] = candidate_key(order_key(v[u]), i);
    }
  }
  __syncthreads();
  const int cnt = sh.count;
  if (cnt > kPoolCapacity) return false;
  // cnt >= k: the k slice maxima at or above the floor are in the pool.
  const uint64_t cut = cnt > p.k ? pool_kth_largest(pool, cnt, p.k, sh) : 0;
  __syncthreads();  // every thread has read sh.count
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  for (int j = threadIdx.x; j < cnt; j += kSampleThreads) {
    if (pool[j] >= cut) sh.keys[atomicAdd(&sh.count, 1)] = ~pool[j];
  }
  return true;
}

// Candidates of one row into sh.ids in rank order (logit desc, id asc); returns how many.
__device__ int rank_candidates(const float* __restrict__ row, const SampleArgs& p, SampleShared& sh, uint64_t* pool) {
  if (!gather_from_pool(row, p, sh, pool)) gather_by_radix(row, p, sh);
  __syncthreads();
  const int m = min(sh.count, kMaxSampleTopK);
  if (static_cast<int>(threadIdx.x) >= m) sh.keys[threadIdx.x] = kEmpty;
  __syncthreads();
  sort_ascending(sh.keys);
  if (static_cast<int>(threadIdx.x) < m) {
    const uint64_t key = ~sh.keys[threadIdx.x];
    sh.ids[threadIdx.x] = static_cast<int32_t>(~static_cast<uint32_t>(key));
  }
  __syncthreads();
  return m;
}

// engine::Sampler::distribution + sample on m ranked candidates (m >= 1); returns the token.
__device__ int32_t draw(const float* __restrict__ row, int m, const SampleArgs& p, double u, SampleShared& sh) {
  const int i = threadIdx.x;
  // 3. softmax in double, max subtracted (the max is the first in rank order).
  const double inv_t = 1.0 / static_cast<double>(p.temperature);
  const float max_logit = row[sh.ids[0]];
  if (i < m) sh.prob[i] = exp((static_cast<double>(row[sh.ids[i]]) - max_logit) * inv_t);
  __syncthreads();
  if (i == 0) {
    double sum = 0.0;
    for (int r = 0; r < m; ++r) sum += sh.prob[r];
    sh.scalar = sum;
  }
  __syncthreads();
  if (i < m) sh.prob[i] /= sh.scalar;
  __syncthreads();

  // 4. top-p: the shortest rank prefix whose cumulative mass reaches p (all when rounding
  // leaves the total under p), renormalised.
  int kept = m;
  if (p.top_p < 1.0f) {
    if (i == 0) {
      double cum = 0.0;
      int keep = m;
      for (int r = 0; r < m; ++r) {
        cum += sh.prob[r];
        if (cum >= p.top_p) {
          keep = r + 1;
          break;
        }
      }
      double mass = 0.0;
      for (int r = 0; r < keep; ++r) mass += sh.prob[r];
      sh.keep = keep;
      sh.scalar = mass;
    }
    __syncthreads();
    kept = sh.keep;
    if (i < kept) sh.prob[i] /= sh.scalar;
    __syncthreads();
  }

  // 5. min-p: drop p < min_p * max p, renormalise.
  if (i < kMaxSampleTopK) sh.alive[i] = i < kept;
  if (p.min_p > 0.0f) {
    if (i == 0) {
      double p_max = 0.0;
      for (int r = 0; r < kept; ++r) p_max = fmax(p_max, sh.prob[r]);
      sh.scalar = p.min_p * p_max;
    }
    __syncthreads();
    if (i < kept) sh.alive[i] = !(sh.prob[i] < sh.scalar);
    __syncthreads();
    if (i == 0) {
      double mass = 0.0;
      for (int r = 0; r < kept; ++r)
        if (sh.alive[r]) mass += sh.prob[r];
      sh.scalar = mass;
    }
    __syncthreads();
    if (sh.alive[i]) sh.prob[i] /= sh.scalar;
  }
  __syncthreads();

  // 6. the walk in ascending id: sort (id, rank position) of the kept.
  sh.keys[i] = sh.alive[i] ? (static_cast<uint64_t>(sh.ids[i]) << 32) | static_cast<uint32_t>(i) : kEmpty;
  __syncthreads();
  sort_ascending(sh.keys);
  int32_t token = -1;
  if (i == 0) {
    double cum = 0.0;
    for (int r = 0; r < kMaxSampleTopK && sh.keys[r] != kEmpty; ++r) {
      token = static_cast<int32_t>(sh.keys[r] >> 32);
      cum += sh.prob[static_cast<uint32_t>(sh.keys[r])];
      if (u < cum) break;  // else the last kept token absorbs the rounding
    }
  }
  return token;
}

__global__ void __launch_bounds__(kSampleThreads) sample_kernel(const float* __restrict__ logits, SampleArgs p,
                                                                const double* __restrict__ u, int32_t* __restrict__ out) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ SampleShared sh;
  extern __shared__ uint64_t pool[];  // kPoolCapacity
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * p.n;
  const int m = rank_candidates(row, p, sh, pool);
  if (m == 0) {  // no finite logit (m is shared: the whole CTA leaves together)
    if (threadIdx.x == 0) out[blockIdx.x] = -1;
    return;
  }
  const int32_t token = draw(row, m, p, u[blockIdx.x], sh);
  if (threadIdx.x == 0) out[blockIdx.x] = token;
}

Status fail(const char* op, const std::string& what) { return Status::error(std::string("cuda: ") + op + ": " + what); }

Status check_rows(const char* op, const float* logits, int T, int64_t n_vocab, const int32_t* out) {
  if (T < 1 || T > kMaxWindowRows)
    return fail(op, "T must be in [1, " + std::to_string(kMaxWindowRows) + "], got " + std::to_string(T));
  if (n_vocab < 1 || n_vocab > INT32_MAX)
    return fail(op, "n_vocab must be in [1, 2^31 - 1] (ids are int32), got " + std::to_string(n_vocab));
  if (!logits || !out) return fail(op, "logits and out must be non-null");
  return Status::ok_status();
}

}  // namespace

Status argmax_rows(const float* logits, int T, int64_t n_vocab, int32_t* out, Stream stream) {
  STRATA_TRY(check_rows("argmax_rows", logits, T, n_vocab, out));
  if (device_cc_major_at_least(9)) {
    STRATA_CUDA_TRY(launch_kernel_clustered(argmax_cluster_kernel, dim3(kArgmaxCluster, static_cast<unsigned>(T)),
                                            dim3(kArgmaxThreads), 0, kArgmaxCluster, stream, logits, n_vocab, out));
  } else {
    STRATA_CUDA_TRY(launch_kernel(argmax_kernel, dim3(static_cast<unsigned>(T)), dim3(kArgmaxThreads), 0, stream, logits,
                                  n_vocab, out));
  }
  return Status::ok_status();
}

// Each row's selection and arithmetic fit in its CTA's shared memory.
int64_t sample_scratch_bytes(int /*T*/, int64_t /*n_vocab*/) { return 0; }

Status sample_rows(const float* logits, int T, int64_t n_vocab, const SampleParams& p, const double* u,
                   void* /*scratch*/, int32_t* out, Stream stream) {
  STRATA_TRY(check_rows("sample_rows", logits, T, n_vocab, out));
  if (!u) return fail("sample_rows", "u must be non-null");
  if (!(std::isfinite(p.temperature) && p.temperature > 0.0f))
    return fail("sample_rows", "temperature must be finite and > 0 (greedy is argmax_rows), got " +
                                   std::to_string(p.temperature));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return fail("sample_rows", "top_p must be in (0, 1], got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return fail("sample_rows", "min_p must be in [0, 1], got " + std::to_string(p.min_p));
  if (p.top_k < 0 || p.top_k > kMaxSampleTopK)
    return fail("sample_rows", "top_k must be in [0, " + std::to_string(kMaxSampleTopK) + "], got " + std::to_string(p.top_k));
  // top_k off keeps every finite logit: that is a top-k of n_vocab, which fits only small vocabularies.
  if (p.top_k == 0 && n_vocab > kMaxSampleTopK)
    return fail("sample_rows", "top_k = 0 (off) over n_vocab = " + std::to_string(n_vocab) + " > " +
                                   std::to_string(kMaxSampleTopK) + " is not sampled on the GPU; use the host sampler");
  const SampleArgs args{n_vocab, p.top_k == 0 ? static_cast<int>(n_vocab) : p.top_k, p.temperature, p.top_p, p.min_p};
  // Above the 48 KiB default: an attribute of the function, not a stream operation (capturable).
  STRATA_CUDA_TRY(cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kPoolBytes)));
  STRATA_CUDA_TRY(launch_kernel(sample_kernel, dim3(static_cast<unsigned>(T)), dim3(kSampleThreads), kPoolBytes, stream,
                                logits, args, u, out));
  return Status::ok_status();
}

}  // namespace strata::cuda
