// native_expert_grouped (moe.h): the window's T x k routed entries grouped by expert on the
// device, then gate/up per group, SwiGLU + q8_1 over the entries, down per group, and each row's
// weighted sum in ascending expert id. The quantized per-group mat-vec is moe_direct.cu's for
// the types and windows it serves (its down call forms SwiGLU + q8_1 itself, and with
// expert_down_combine the routed sum too, moe_combine.cuh), else moe_grouped.cuh's (one
// generated instance per weight type); this file holds the grouping (on its own, or fused with
// the router's softmax + top-k), the float-weight variant, the combine (on its own, or with the
// shared expert's gated output) and the host entries. Its kernels are launched with PDL
// (launch.cuh): each waits for its predecessor before its first read of an activation.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "launch.cuh"
#include "moe.h"
#include "moe_combine.cuh"
#include "moe_direct.h"
#include "moe_grouped.cuh"
#include "route.cuh"

namespace strata::cuda {
namespace moe_detail {
namespace {

bool is_float_type(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16; }

std::string type_name(Type t) {
  const auto info = quant::type_info(t);
  return info ? std::string(info->name) : "type id " + std::to_string(static_cast<uint32_t>(t));
}

int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

// Group rows of the grouped launches: block row y takes groups y, y + kGroupRows, ... A window of
// T = 1..3 rows (at most 30 groups with k = 10) gets one block row per group; longer windows share.
constexpr int kGroupRows = 32;

// ---- grouping ----------------------------------------------------------------------------------

// Where the grouping arrays go (ExpertScratchLayout's, resolved against the scratch's base).
struct GroupOut {
  int* n_groups;
  int* group_expert;
  int* group_start;
  int* entry_row;
  float* entry_weight;
  int* row_entries;
};

GroupOut group_out(const ExpertScratch& scratch, const ExpertScratchLayout& l) {
  uint8_t* base = static_cast<uint8_t*>(scratch.base);
  return GroupOut{reinterpret_cast<int*>(base + l.n_groups),      reinterpret_cast<int*>(base + l.group_expert),
                  reinterpret_cast<int*>(base + l.group_start),   reinterpret_cast<int*>(base + l.entry_row),
                  reinterpret_cast<float*>(base + l.entry_weight), reinterpret_cast<int*>(base + l.row_entries)};
}

// The grouping of n entries (entry i = row i / k, slot i % k; expert_of in shared memory, in
// range), by the whole CTA (blockDim.x >= n and a multiple of 32; every thread must call it).
// Thread i = entry i. The sorted position of an entry is its rank under (expert, i): the number of
// entries before it in that order, so positions are a permutation and entries of one expert keep
// their row order. Its rank within its own row under the same order puts row t's entries in
// ascending expert id at row_entries[t * k ..]. A group's index is the number of group starts
// before it: warp ballots and the per-warp counts. sorted: shared scratch of kMaxExpertEntries
// ints; warp_starts: of kMaxExpertEntries / 32.
__device__ void group_entries_block(const int* expert_of, const float* weight_of, int n, int k, int* sorted,
                                    int* warp_starts, const GroupOut& o) {
  const int i = threadIdx.x, lane = i & 31, warp = i >> 5;
  if (i < n) {
    const int e = expert_of[i];
    const int row = i / k;
    const unsigned row_first = static_cast<unsigned>(row * k);
    int pos = 0, row_rank = 0;
    for (int m = 0; m < n; ++m) {
      const int em = expert_of[m];
      const int before = em < e || (em == e && m < i);
      pos += before;
      if (static_cast<unsigned>(m) - row_first < static_cast<unsigned>(k)) row_rank += before;  // m in row's entries
    }
    sorted[pos] = e;
    o.entry_row[pos] = row;
    o.entry_weight[pos] = weight_of[i];
    o.row_entries[row * k + row_rank] = pos;
  }
  __syncthreads();
  const bool starts_group = i < n && (i == 0 || sorted[i - 1] != sorted[i]);
  const unsigned ballot = __ballot_sync(0xffffffffu, starts_group);
  if (lane == 0 && i < n) warp_starts[warp] = __popc(ballot);  // the warps that hold entries
  __syncthreads();
  if (starts_group) {
    int gi = __popc(ballot & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) gi += warp_starts[w];
    o.group_expert[gi] = sorted[i];
    o.group_start[gi] = i;
  }
  if (i == 0) {
    int total = 0;
    for (int w = 0; w < (n + 31) / 32; ++w) total += warp_starts[w];
    *o.n_groups = total;
    o.group_start[total] = n;
  }
}

// The grouping of router_topk's ids/weights: one CTA of kMaxExpertEntries threads.
__global__ void __launch_bounds__(kMaxExpertEntries) group_entries_kernel(const int32_t* __restrict__ ids,
                                                                          const float* __restrict__ weights, int n,
                                                                          int k, int n_expert, GroupOut o) {
  __shared__ int expert_of[kMaxExpertEntries];        // by entry
  __shared__ int sorted[kMaxExpertEntries];           // expert by sorted position
  __shared__ int warp_starts[kMaxExpertEntries / 32];  // group starts per warp of entries
  pdl_launch_dependents();
  pdl_wait();
  const int i = threadIdx.x;
  // Router ids are in range; the clamp only keeps a corrupt id from reading outside the tensors.
  if (i < n) expert_of[i] = min(max(static_cast<int>(ids[i]), 0), n_expert - 1);
  __syncthreads();
  group_entries_block(expert_of, weights, n, k, sorted, warp_starts, o);
}

// ---- router + grouping in one launch ----------------------------------------------------------------

// One CTA for the whole window: warp t routes row t (route_row), then all kRouteThreads group the
// window's T x k entries (group_entries_block). Per row, as reference::route: route.cuh's
// warp_softmax, the top k under ranks_before, weights p_e / (the float sum of the k in rank
// order). The row stays in registers (kRouterLaneSlots per lane), read with independent loads:
// one round trip to memory. The top k is k rounds of warp_rank_first over each lane's best
// untaken expert; the winner's owner marks it taken and finds its next best by a short tree over
// its slots. (The earlier forms took about 10 us per call at T = 1 on the H200: 512 threads
// ranking every segment's candidates against each other, then probabilities in shared memory
// that the winning lane rescanned each round, a chain of dependent loads.)
constexpr int kRouteThreads = 256;
constexpr int kRouteWarps = kRouteThreads / 32;
static_assert(kRouteThreads >= kMaxExpertEntries, "one thread per entry in the grouping");
static_assert(kRouteWarps >= kMaxWindowRows, "one warp per window row");

// The value route.cuh's ranks_before compares: NaN (every p of a row once any logit is NaN) ranks
// after every number, so such a row still gets k distinct experts; a taken expert (-inf) after NaN.
__device__ __forceinline__ float rank_value(float p) { return p == p ? p : -1.0f; }

// One lane's experts of a row: slot j is expert lane + 32 j.
struct LaneExperts {
  float p[kRouterLaneSlots];     // probability
  float rank[kRouterLaneSlots];  // rank_value(p); -inf once taken, and for slots past n
};

// A lane's best untaken expert: its rank value, slot and probability.
struct LaneBest {
  float rank;
  int slot;
  float p;
};

// By a tree over the slots. Its left operand always holds the lower slots, hence the lower ids, so
// keeping it on equal rank values is ranks_before's tie rule. With every slot at -inf the result
// is slot 0 at -inf, which no round picks while the row has an untaken expert (k <= n).
__device__ __forceinline__ LaneBest lane_best(const LaneExperts& x) {
  LaneBest b[kRouterLaneSlots];
#pragma unroll
  for (int j = 0; j < kRouterLaneSlots; ++j) b[j] = LaneBest{x.rank[j], j, x.p[j]};
#pragma unroll
  for (int w = 1; w < kRouterLaneSlots; w *= 2)
#pragma unroll
    for (int j = 0; j + w < kRouterLaneSlots; j += 2 * w)
      if (b[j + w].rank > b[j].rank) b[j] = b[j + w];
  return b[0];
}

// Row x's top k by one warp (n <= kRouterMaxExperts, k <= n): ids and probabilities in rank order
// into sel_id[0..k) and sel_p[0..k), each written by the lane that owns the expert.
__device__ __forceinline__ void route_row(const float* __restrict__ x, int n, int k, int lane, int* sel_id, float* sel_p) {
  LaneExperts le;
#pragma unroll
  for (int j = 0; j < kRouterLaneSlots; ++j) le.p[j] = lane + 32 * j < n ? x[lane + 32 * j] : 0.0f;
  warp_softmax(le.p, n, lane);
#pragma unroll
  for (int j = 0; j < kRouterLaneSlots; ++j) le.rank[j] = lane + 32 * j < n ? rank_value(le.p[j]) : -INFINITY;
  LaneBest b = lane_best(le);
  for (int r = 0; r < k; ++r) {
    float wv = b.rank;
    int wi = lane + 32 * b.slot;
    warp_rank_first(wv, wi);
    // The winner is its owner's best; only there does anything change (no branch: every lane
    // runs the tree, so the round is the butterfly plus the tree).
    const bool owner = lane == (wi & 31);
    if (owner) {
      sel_id[r] = wi;
      sel_p[r] = b.p;
    }
#pragma unroll
    for (int j = 0; j < kRouterLaneSlots; ++j)
      if (owner && j == b.slot) le.rank[j] = -INFINITY;
    b = lane_best(le);
  }
}

__global__ void __launch_bounds__(kRouteThreads) route_group_kernel(const float* __restrict__ logits, int64_t stride,
                                                                    int T, int n, int k, int32_t* __restrict__ ids,
                                                                    float* __restrict__ weights, GroupOut o) {
  __shared__ int sel_id[kMaxExpertEntries];    // entry t * k + r: row t's r-th expert
  __shared__ float sel_p[kMaxExpertEntries];   // ... its probability
  __shared__ float sel_w[kMaxExpertEntries];   // ... and its weight
  __shared__ int sorted[kMaxExpertEntries];    // group_entries_block's scratch
  __shared__ int warp_starts[kMaxExpertEntries / 32];
  pdl_wait();

  const int t = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (t < T) {
    route_row(logits + static_cast<int64_t>(t) * stride, n, k, lane, sel_id + t * k, sel_p + t * k);
    __syncwarp();
    // Weights: the float sum of the k probabilities in rank order (formed on every lane from
    // broadcast reads), then one division per entry.
    float selected_sum = 0.0f;
    for (int r = 0; r < k; ++r) selected_sum = __fadd_rn(selected_sum, sel_p[t * k + r]);
    for (int r = lane; r < k; r += 32) {
      const int i = t * k + r;
      const float wv = __fdiv_rn(sel_p[i], selected_sum);
      sel_w[i] = wv;
      ids[i] = sel_id[i];
      weights[i] = wv;
    }
  }
  __syncthreads();
  group_entries_block(sel_id, sel_w, T * k, k, sorted, warp_starts, o);
  // The trigger comes last: the next launch, the routed gate/up, has nothing to do before its
  // wait, and its CTAs (1280 at T = 1), resident early, would hold every SM while the shared
  // expert on the side stream waits for slots, its down then late for the join. Triggered at
  // the start, T = 1 took 3.0% longer (H100, bench/results/2026-12-06-h100-route-trigger).
  pdl_launch_dependents();
}

// ---- float weights (F32 / F16 / BF16; f32 activations) ---------------------------------------------

template <Type WT>
__device__ __forceinline__ float weight_at(const uint8_t* row, int c) {
  if constexpr (WT == Type::F32) return reinterpret_cast<const float*>(row)[c];
  if constexpr (WT == Type::F16) return qd::f16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
  return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[c]) << 16);  // BF16
}

// Warp w of a CTA owns output row blockIdx.x * kWarps + w of the group's expert; lanes stride K and
// every weight value read feeds the batch's (up to 8) entries. Used by the tiny test models only.
template <Type WT>
__global__ void __launch_bounds__(kThreads) grouped_mmvf_kernel(const GroupedArgs a) {
  grouped_launch_start(a);
  grouped_launch_wait(a);  // the group's expert is not known before the grouping, so no weight prefetch
  const int n_groups = *a.n_groups;
  if (static_cast<int>(blockIdx.y) >= n_groups) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = static_cast<int>(blockIdx.x) * kWarps + warp;
  if (r >= a.rows) return;  // no barrier below
  const int K = a.nchunks * 32;
  for (int grp = blockIdx.y; grp < n_groups; grp += gridDim.y) {
    const uint8_t* w = weight_row(a, a.group_expert[grp], r);
    const int first = a.group_start[grp], last = a.group_start[grp + 1];
    for (int b0 = first; b0 < last; b0 += kBatch) {
      const int nb = last - b0 < kBatch ? last - b0 : kBatch;
      const float* x[kBatch];
#pragma unroll
      for (int t = 0; t < kBatch; ++t) {
        const int64_t row = t < nb ? (a.act_row != nullptr ? a.act_row[b0 + t] : b0 + t) : 0;
        x[t] = reinterpret_cast<const float*>(a.act + row * a.act_stride);
      }
      float acc[kBatch];
#pragma unroll
      for (int t = 0; t < kBatch; ++t) acc[t] = 0.0f;
      for (int c = lane; c < K; c += 32) {
        const float wv = weight_at<WT>(w, c);
#pragma unroll
        for (int t = 0; t < kBatch; ++t)
          if (t < nb) acc[t] = fmaf(wv, x[t][c], acc[t]);
      }
#pragma unroll
      for (int t = 0; t < kBatch; ++t) {
        if (t >= nb) break;  // warp-uniform
        const float s = warp_sum(acc[t]);
        if (lane == 0) a.out[static_cast<int64_t>(b0 + t) * a.out_stride + r] = s;
      }
    }
  }
}

Status launch_grouped_f(Type t, const GroupedArgs& a, dim3 grid, cudaStream_t stream) {
  switch (t) {
    case Type::F32: STRATA_CUDA_TRY(launch_kernel(grouped_mmvf_kernel<Type::F32>, grid, dim3(kThreads), 0, stream, a)); break;
    case Type::F16: STRATA_CUDA_TRY(launch_kernel(grouped_mmvf_kernel<Type::F16>, grid, dim3(kThreads), 0, stream, a)); break;
    case Type::BF16: STRATA_CUDA_TRY(launch_kernel(grouped_mmvf_kernel<Type::BF16>, grid, dim3(kThreads), 0, stream, a)); break;
    default: return Status::error("cuda: native_expert_grouped: no float kernel for " + type_name(t));
  }
  return Status::ok_status();
}

// ---- the routed sum ----------------------------------------------------------------------------------

constexpr int kCombineThreads = 256;

// One thread per (column j, row t = blockIdx.y): moe_combine.cuh's routed_sum_column.
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const RoutedSum c) {
  pdl_launch_dependents();
  pdl_wait();
  const int j = blockIdx.x * kCombineThreads + threadIdx.x;
  if (j < c.H) routed_sum_column(c, static_cast<int>(blockIdx.y), j);
}

// ---- host side --------------------------------------------------------------------------------------

Result<DeviceInfo> current_device() {
  int dev = 0, major = 0, minor = 0, sms = 0, optin = 0;
  STRATA_CUDA_TRY(cudaGetDevice(&dev));
  STRATA_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  STRATA_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  STRATA_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  STRATA_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return DeviceInfo{10 * major + minor, sms, static_cast<size_t>(optin)};
}

// One grouped mat-vec: IQ3_XXS / Q2_0 / IQ4_NL on grouped_direct_kernel where it applies, other
// quantized types on grouped_mmvq_kernel, float types on grouped_mmvf_kernel.
Status launch_grouped(Type t, const GroupedArgs& a, int group_rows, const DeviceInfo& dev, cudaStream_t stream) {
  if (is_float_type(t)) {
    const dim3 grid(static_cast<unsigned>((a.rows + kWarps - 1) / kWarps), static_cast<unsigned>(group_rows));
    return launch_grouped_f(t, a, grid, stream);
  }
  if (grouped_direct_supports(t, a)) return launch_grouped_direct(t, a, group_rows, stream);
  switch (t) {
#define STRATA_CASE(name) \
  case Type::name: return launch_grouped_q<Type::name>(a, group_rows, dev, stream);
    STRATA_MMVQ_QUANT_TYPES(STRATA_CASE)
#undef STRATA_CASE
    default:
      return Status::error("cuda: native_expert_grouped: unsupported weight type " + type_name(t));
  }
}

bool aligned(const void* p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

// Shape, type and alignment checks of the weights; the message names the tensor.
Status check_weights(const ExpertWeights& w) {
  const std::string where = "cuda: native_expert_grouped: ";
  if (w.n_expert < 1 || w.n_ff < 1 || w.n_embd < 1)
    return Status::error(where + "n_expert, n_ff and n_embd must be positive");
  const bool fused = static_cast<bool>(w.gate_up);
  if (fused == (w.gate || w.up)) return Status::error(where + "set either gate and up, or gate_up");
  if (!fused && !(w.gate && w.up)) return Status::error(where + "gate and up must both be set");
  if (!fused && w.gate.type != w.up.type) return Status::error(where + "gate and up must have one type");
  const auto check = [&](const DTensor& t, const char* name, int64_t rows, int64_t cols) -> Status {
    const std::string n = std::string(name) + " (" + type_name(t.type) + ")";
    if (!mmvq_supports(t.type)) return Status::error(where + n + ": unsupported weight type");
    const auto info = *quant::type_info(t.type);
    if (t.rows != rows || t.cols != cols)
      return Status::error(where + n + " is " + std::to_string(t.rows) + " x " + std::to_string(t.cols) + ", expected " +
                           std::to_string(rows) + " x " + std::to_string(cols));
    if (cols % 32 != 0 || cols % info.block_size != 0)
      return Status::error(where + n + ": " + std::to_string(cols) + " columns are not a multiple of 32 and of the block size " +
                           std::to_string(info.block_size));
    if (t.row_bytes != cols / info.block_size * info.type_size) return Status::error(where + n + ": row_bytes does not match the type");
    if (!aligned(t.data, 16)) return Status::error(where + n + " must be 16-byte aligned");
    return Status::ok_status();
  };
  const int64_t E = w.n_expert, ff = w.n_ff, H = w.n_embd;
  if (fused) {
    STRATA_TRY(check(w.gate_up, "gate_up", E * 2 * ff, H));
  } else {
    STRATA_TRY(check(w.gate, "gate", E * ff, H));
    STRATA_TRY(check(w.up, "up", E * ff, H));
  }
  STRATA_TRY(check(w.down, "down", E * H, ff));
  if (ff % 32 != 0) return Status::error(where + "n_ff must be a multiple of 32 (the q8_1 form of h)");
  if (E > (1 << 24) || ff > (1 << 20) || H > (1 << 20)) return Status::error(where + "shape out of range");
  return Status::ok_status();
}

}  // namespace
}  // namespace moe_detail

ExpertScratchLayout expert_scratch_layout(const ExpertWeights& w, int cap_entries) {
  using moe_detail::align256;
  const int64_t cap = cap_entries > 0 ? cap_entries : 0;
  ExpertScratchLayout l;
  int64_t at = 0;
  const auto take = [&](int64_t bytes) {
    const int64_t o = at;
    at = align256(at + bytes);
    return o;
  };
  l.n_groups = take(4);
  l.group_expert = take(4 * cap);
  l.group_start = take(4 * (cap + 1));
  l.entry_row = take(4 * cap);
  l.entry_weight = take(4 * cap);
  l.row_entries = take(4 * cap);
  l.gate_up = take(4 * cap * 2 * w.n_ff);
  l.h = take(4 * cap * w.n_ff);
  l.h_q8_stride = (w.n_ff / 32 * 36 + 15) / 16 * 16;
  l.h_q8 = take(cap * l.h_q8_stride);
  l.out = take(4 * cap * w.n_embd);
  l.bytes = at;
  return l;
}

int64_t expert_scratch_bytes(const ExpertWeights& w, int cap_entries) { return expert_scratch_layout(w, cap_entries).bytes; }

namespace moe_detail {
namespace {

// What every stage checks of a call over T rows of k entries; the scratch's layout when it holds.
Result<ExpertScratchLayout> check_call(const std::string& where, const ExpertWeights& w, int T, int k,
                                       const ExpertScratch& scratch) {
  if (w.n_expert < 1 || w.n_ff < 1 || w.n_embd < 1)
    return Status::error(where + "n_expert, n_ff and n_embd must be positive");
  if (T < 1 || T > kMaxWindowRows) return Status::error(where + "T must be in 1.." + std::to_string(kMaxWindowRows));
  if (k < 1 || k > w.n_expert) return Status::error(where + "k must be in 1..n_expert");
  const int n = T * k;
  if (n > kMaxExpertEntries) return Status::error(where + "T * k exceeds " + std::to_string(kMaxExpertEntries));
  if (n > scratch.cap_entries)
    return Status::error(where + "T * k exceeds the scratch's cap_entries " + std::to_string(scratch.cap_entries));
  const ExpertScratchLayout l = expert_scratch_layout(w, scratch.cap_entries);
  if (scratch.base == nullptr || !aligned(scratch.base, 256) || scratch.bytes < l.bytes)
    return Status::error(where + "scratch must be 256-byte aligned with at least " + std::to_string(l.bytes) + " bytes");
  return l;
}

std::string call_name(const char* fn, int T, int k) {
  return std::string("cuda: ") + fn + "(T=" + std::to_string(T) + ", k=" + std::to_string(k) + "): ";
}

// The routed sum's arguments over the scratch of a call, checked.
Result<RoutedSum> routed_sum_args(const char* fn, const ExpertWeights& w, int T, int k, const ExpertScratch& scratch,
                                  const float* s, const float* gate_logit, int64_t gate_stride, float* y,
                                  const WideCombine& wide) {
  const std::string where = call_name(fn, T, k);
  auto l = check_call(where, w, T, k, scratch);
  if (!l) return l.status();
  if (y == nullptr) return Status::error(where + "null y");
  if (wide.out != nullptr) {
    if (wide.x == nullptr || wide.alpha == nullptr || wide.S < 1)
      return Status::error(where + "a wide combine needs x, alpha and S >= 1");
    const auto lo = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
    const uintptr_t n = static_cast<uintptr_t>(T) * wide.S * w.n_embd * sizeof(float);
    if (wide.out != wide.x && lo(wide.out) < lo(wide.x) + n && lo(wide.x) < lo(wide.out) + n)
      return Status::error(where + "the wide combine's out must be x itself or not overlap it");
  }
  const uint8_t* base = static_cast<const uint8_t*>(scratch.base);
  RoutedSum c;
  c.out = reinterpret_cast<const float*>(base + l->out);
  c.H = static_cast<int>(w.n_embd);
  c.k = k;
  c.row_entries = reinterpret_cast<const int*>(base + l->row_entries);
  c.entry_weight = reinterpret_cast<const float*>(base + l->entry_weight);
  c.s = s;
  c.gate_logit = gate_logit;
  c.gate_stride = gate_stride;
  c.y = y;
  c.wide = wide;
  return c;
}

Status launch_combine(const RoutedSum& c, int T, Stream stream) {
  const dim3 grid(static_cast<unsigned>((c.H + kCombineThreads - 1) / kCombineThreads), static_cast<unsigned>(T));
  STRATA_CUDA_TRY(launch_kernel(combine_kernel, grid, dim3(kCombineThreads), 0, stream, c));
  return Status::ok_status();
}

Status launch_combine(const char* fn, const ExpertWeights& w, int T, int k, const ExpertScratch& scratch,
                      const float* s, const float* gate_logit, int64_t gate_stride, float* y, Stream stream,
                      const WideCombine& wide = {}) {
  auto c = routed_sum_args(fn, w, T, k, scratch, s, gate_logit, gate_stride, y, wide);
  if (!c) return c.status();
  return launch_combine(*c, T, stream);
}

// One call of the grouped expert MLP, checked: the scratch's layout, the device, the grouping and
// the grid's group rows.
struct MlpCall {
  ExpertScratchLayout l;
  DeviceInfo dev;
  GroupOut g;
  uint8_t* base = nullptr;
  int T = 0, k = 0, group_rows = 0;

  // What both grouped launches of the call take alike: the grouping and the entries per batch.
  GroupedArgs grouped_args() const {
    GroupedArgs a;
    a.n_groups = g.n_groups;
    a.group_expert = g.group_expert;
    a.group_start = g.group_start;
    a.batch = T < kBatch ? T : kBatch;
    return a;
  }
};

Result<MlpCall> mlp_call(const std::string& where, const ExpertWeights& w, int T, int k, const ExpertScratch& scratch) {
  STRATA_TRY(check_weights(w));
  auto lay = check_call(where, w, T, k, scratch);
  if (!lay) return lay.status();
  auto dev = current_device();
  if (!dev) return dev.status();
  const Type gt = (w.gate_up ? w.gate_up : w.gate).type, dt = w.down.type;
  if ((!is_float_type(gt) || !is_float_type(dt)) && dev->cc < 75)
    return Status::error(where + "quantized experts need compute capability 7.5 or newer (int8 tensor cores)");
  MlpCall c;
  c.l = *lay;
  c.dev = *dev;
  c.g = group_out(scratch, c.l);
  c.base = static_cast<uint8_t*>(scratch.base);
  c.T = T;
  c.k = k;
  const int n = T * k;
  c.group_rows = n < kGroupRows ? n : kGroupRows;  // at most n groups; block rows beyond them return at once
  return c;
}

// Gate/up per group into the scratch's gate_up rows.
Status launch_gate_up(const std::string& where, const MlpCall& c, const ExpertWeights& w, const Act& u, Stream stream) {
  const DTensor& gu_t = w.gate_up ? w.gate_up : w.gate;
  const Type gt = gu_t.type;
  if (u.cols != w.n_embd) return Status::error(where + "u has " + std::to_string(u.cols) + " columns, n_embd is " + std::to_string(w.n_embd));
  const bool q8_in = mmvq_takes_q8_1(gt);
  if (q8_in) {
    if (u.q8 == nullptr || !aligned(u.q8, 16) || u.q8_stride % 16 != 0 || u.q8_stride < w.n_embd / 32 * 36)
      return Status::error(where + "u.q8 must be set, 16-byte aligned, with q8_stride a multiple of 16 >= one q8_1 row");
  } else if (u.f32 == nullptr || !aligned(u.f32, 16) || u.f32_stride % 4 != 0 || u.f32_stride < w.n_embd) {
    return Status::error(where + "u.f32 must be 16-byte aligned with f32_stride a multiple of 4 >= n_embd");
  }
  GroupedArgs a = c.grouped_args();
  a.rows = 2 * w.n_ff;
  if (w.gate_up) {
    a.w0 = a.w1 = static_cast<const uint8_t*>(w.gate_up.data);
    a.split = a.rows;
    a.stride0 = a.stride1 = a.rows;
  } else {
    a.w0 = static_cast<const uint8_t*>(w.gate.data);
    a.w1 = static_cast<const uint8_t*>(w.up.data);
    a.split = w.n_ff;
    a.stride0 = a.stride1 = w.n_ff;
  }
  a.row_bytes = gu_t.row_bytes;
  a.nchunks = w.n_embd / 32;
  a.act = q8_in ? static_cast<const uint8_t*>(u.q8) : reinterpret_cast<const uint8_t*>(u.f32);
  a.act_stride = q8_in ? u.q8_stride : u.f32_stride * static_cast<int64_t>(sizeof(float));
  a.act_row = c.g.entry_row;
  if (c.T == 1) {
    // One window row: every entry's activations are row 0, so the kernels take it directly
    // instead of reading entry_row, a dependent round trip after the grouping's on the path of
    // every gate/up CTA.
    a.act_row = nullptr;
    a.act_stride = 0;
  }
  a.out = reinterpret_cast<float*>(c.base + c.l.gate_up);
  a.out_stride = 2 * w.n_ff;
  // At T = 1 launch_down's kernel reads the grouping before its wait (GroupedArgs). H200,
  // iq3_xxs, with the join's PDL edge: T = 1 -0.45%; at T = 4, whose gate/up runs in several
  // waves, the deferred trigger held the down launch back: +0.4%.
  a.trigger_after_wait = c.T == 1;
  return launch_grouped(gt, a, c.group_rows, c.dev, stream);
}

// SwiGLU (+ q8_1) and down per group into the scratch's out rows; with `sum` and enough
// tile_counts, the routed sum folded into the down launch where grouped_direct_kernel serves it
// (*folded says whether it was; the caller launches the combine otherwise).
Status launch_down(const MlpCall& c, const ExpertWeights& w, const RoutedSum* sum, uint32_t* tile_counts,
                   int tile_count_cap, bool* folded, Stream stream) {
  const Type dt = w.down.type;
  const bool q8_mid = mmvq_takes_q8_1(dt);
  float* gate_up = reinterpret_cast<float*>(c.base + c.l.gate_up);
  float* h = reinterpret_cast<float*>(c.base + c.l.h);
  uint8_t* h_q8 = c.base + c.l.h_q8;
  GroupedArgs a = c.grouped_args();
  a.w0 = a.w1 = static_cast<const uint8_t*>(w.down.data);
  a.rows = w.n_embd;
  a.split = a.rows;
  a.stride0 = a.stride1 = w.n_embd;
  a.row_bytes = w.down.row_bytes;
  a.nchunks = w.n_ff / 32;
  a.act = q8_mid ? h_q8 : reinterpret_cast<const uint8_t*>(h);
  a.act_stride = q8_mid ? c.l.h_q8_stride : w.n_ff * static_cast<int64_t>(sizeof(float));
  a.act_row = nullptr;  // entry i's h is row i
  a.out = reinterpret_cast<float*>(c.base + c.l.out);
  a.out_stride = w.n_embd;
  if (folded != nullptr) *folded = false;
  if (q8_mid && grouped_direct_supports(dt, a)) {
    // The direct kernel forms h and its q8_1 codes itself (and still leaves both in the scratch).
    a.swiglu_gu = gate_up;
    a.h_out = h;
    a.h_q8_out = h_q8;
    a.h_q8_stride = c.l.h_q8_stride;
    a.groups_settled = c.T == 1;  // as launch_gate_up's trigger_after_wait, its programmatic predecessor
    const bool fold = sum != nullptr && tile_counts != nullptr && grouped_direct_tiles(dt, a) <= tile_count_cap;
    if (!fold) return launch_grouped_direct(dt, a, c.group_rows, stream);
    CombineTail tail;
    tail.sum = *sum;
    tail.T = c.T;
    tail.tile_count = tile_counts;
    if (folded != nullptr) *folded = true;
    return launch_grouped_direct(dt, a, c.group_rows, stream, &tail);
  }
  STRATA_TRY(swiglu_entries(gate_up, c.T * c.k, w.n_ff, c.g.n_groups, c.g.group_start, h, q8_mid ? h_q8 : nullptr,
                            c.l.h_q8_stride, stream));
  return launch_grouped(dt, a, c.group_rows, c.dev, stream);
}

}  // namespace
}  // namespace moe_detail

Status group_expert_entries(const ExpertWeights& w, const int32_t* ids, const float* weights, int T, int k,
                            const ExpertScratch& scratch, Stream stream) {
  using namespace moe_detail;
  const std::string where = call_name("group_expert_entries", T, k);
  auto l = check_call(where, w, T, k, scratch);
  if (!l) return l.status();
  if (ids == nullptr || weights == nullptr) return Status::error(where + "null ids or weights");
  STRATA_CUDA_TRY(launch_kernel(group_entries_kernel, dim3(1), dim3(kMaxExpertEntries), 0, stream, ids, weights, T * k, k,
                                w.n_expert, group_out(scratch, *l)));
  return Status::ok_status();
}

Status route_and_group(const float* logits, int64_t logits_stride, int T, int k, const ExpertWeights& w,
                       const ExpertScratch& scratch, int32_t* ids, float* weights, Stream stream) {
  using namespace moe_detail;
  const std::string where = call_name("route_and_group", T, k) + "n_expert=" + std::to_string(w.n_expert) + ": ";
  auto l = check_call(where, w, T, k, scratch);
  if (!l) return l.status();
  if (logits == nullptr || ids == nullptr || weights == nullptr) return Status::error(where + "null logits, ids or weights");
  if (logits_stride < w.n_expert) return Status::error(where + "logits_stride must be >= n_expert");
  if (w.n_expert > kRouterMaxExperts)
    return Status::error(where + "n_expert must be <= " + std::to_string(kRouterMaxExperts) + " (the router keeps a row in registers, " +
                         std::to_string(kRouterLaneSlots) + " experts per lane)");
  STRATA_CUDA_TRY(launch_kernel(route_group_kernel, dim3(1), dim3(kRouteThreads), 0, stream, logits, logits_stride, T,
                                w.n_expert, k, ids, weights, group_out(scratch, *l)));
  return Status::ok_status();
}

Status expert_mlp_grouped(const ExpertWeights& w, const Act& u, int k, const ExpertScratch& scratch, Stream stream) {
  using namespace moe_detail;
  const std::string where = call_name("expert_mlp_grouped", u.T, k);
  auto c = mlp_call(where, w, u.T, k, scratch);
  if (!c) return c.status();
  STRATA_TRY(launch_gate_up(where, *c, w, u, stream));
  return launch_down(*c, w, nullptr, nullptr, 0, nullptr, stream);
}

Status expert_gate_up_grouped(const ExpertWeights& w, const Act& u, int k, const ExpertScratch& scratch, Stream stream) {
  using namespace moe_detail;
  const std::string where = call_name("expert_gate_up_grouped", u.T, k);
  auto c = mlp_call(where, w, u.T, k, scratch);
  if (!c) return c.status();
  return launch_gate_up(where, *c, w, u, stream);
}

Status expert_down_combine(const ExpertWeights& w, int T, int k, const ExpertScratch& scratch, const float* s,
                           const float* gate_logit, int64_t gate_stride, float* y, const WideCombine* wide,
                           uint32_t* tile_counts, int tile_count_cap, Stream stream) {
  using namespace moe_detail;
  const char* fn = "expert_down_combine";
  const std::string where = call_name(fn, T, k);
  if ((s == nullptr) != (gate_logit == nullptr) || (s != nullptr && gate_stride < 1))
    return Status::error(where + "s and gate_logit must both be set (gate_stride >= 1) or both be null");
  if (tile_counts != nullptr && (tile_count_cap < 1 || !aligned(tile_counts, 4)))
    return Status::error(where + "tile_counts must be 4-byte aligned with tile_count_cap >= 1");
  auto c = mlp_call(where, w, T, k, scratch);
  if (!c) return c.status();
  auto sum = routed_sum_args(fn, w, T, k, scratch, s, gate_logit, gate_stride, y, wide != nullptr ? *wide : WideCombine{});
  if (!sum) return sum.status();
  bool folded = false;
  STRATA_TRY(launch_down(*c, w, &*sum, tile_counts, tile_count_cap, &folded, stream));
  return folded ? Status::ok_status() : launch_combine(*sum, T, stream);
}

Status expert_combine(const ExpertWeights& w, int T, int k, const ExpertScratch& scratch, float* y, Stream stream) {
  return moe_detail::launch_combine("expert_combine", w, T, k, scratch, nullptr, nullptr, 1, y, stream);
}

Status expert_combine_shared(const ExpertWeights& w, int T, int k, const ExpertScratch& scratch, const float* s,
                             const float* gate_logit, int64_t gate_stride, float* y, Stream stream,
                             const WideCombine* wide) {
  if (s == nullptr || gate_logit == nullptr || gate_stride < 1)
    return Status::error(moe_detail::call_name("expert_combine_shared", T, k) + "s and gate_logit must be set, gate_stride >= 1");
  return moe_detail::launch_combine("expert_combine_shared", w, T, k, scratch, s, gate_logit, gate_stride, y, stream,
                                    wide != nullptr ? *wide : WideCombine{});
}

Status native_expert_grouped_pregrouped(const ExpertWeights& w, const Act& u, int k, const ExpertScratch& scratch,
                                        float* y, Stream stream) {
  if (y == nullptr) return Status::error(moe_detail::call_name("native_expert_grouped", u.T, k) + "null y");
  STRATA_TRY(expert_mlp_grouped(w, u, k, scratch, stream));
  return expert_combine(w, u.T, k, scratch, y, stream);
}

Status native_expert_grouped(const ExpertWeights& w, const Act& u, const int32_t* ids, const float* weights, int k,
                             const ExpertScratch& scratch, float* y, Stream stream) {
  const std::string where = moe_detail::call_name("native_expert_grouped", u.T, k);
  STRATA_TRY(moe_detail::check_weights(w));  // before any launch, so a bad tensor leaves nothing half done
  if (ids == nullptr || weights == nullptr || y == nullptr) return Status::error(where + "null ids, weights or y");
  STRATA_TRY(group_expert_entries(w, ids, weights, u.T, k, scratch, stream));
  return native_expert_grouped_pregrouped(w, u, k, scratch, y, stream);
}

// ---- the shared expert's SwiGLU and down in one launch ---------------------------------------------

namespace moe_detail {
namespace {

// The shared expert's down as grouped_direct_kernel's one group of T entries (expert 0: down is
// the only matrix), its activations the gate | up rows (swiglu_gu).
GroupedArgs shared_down_args(const DTensor& down, const float* gate_up, int T, const int32_t* grouping, float* s,
                             float* h, void* h_q8, int64_t h_q8_stride) {
  GroupedArgs a;
  a.n_groups = grouping;
  a.group_expert = grouping + 1;
  a.group_start = grouping + 2;
  a.batch = T < kBatch ? T : kBatch;
  a.w0 = a.w1 = static_cast<const uint8_t*>(down.data);
  a.rows = static_cast<int>(down.rows);
  a.split = a.rows;
  a.stride0 = a.stride1 = down.rows;
  a.row_bytes = down.row_bytes;
  a.nchunks = static_cast<int>(down.cols / 32);
  a.out = s;
  a.out_stride = down.rows;
  a.swiglu_gu = gate_up;
  a.h_out = h;
  a.h_q8_out = static_cast<uint8_t*>(h_q8);
  a.h_q8_stride = h_q8_stride;
  return a;
}

}  // namespace
}  // namespace moe_detail

bool shared_down_fused_supports(const DTensor& down, int T) {
  using namespace moe_detail;
  if (!down || T < 1 || down.cols % 32 != 0 || !mmvq_takes_q8_1(down.type)) return false;
  return grouped_direct_supports(down.type, shared_down_args(down, nullptr, T, nullptr, nullptr, nullptr, nullptr, 0));
}

void shared_grouping_words(int T, int32_t (&words)[4]) {
  words[0] = 1;  // n_groups
  words[1] = 0;  // the group's expert
  words[2] = 0;  // group_start[0]
  words[3] = T;  // group_start[1]
}

Status shared_down_fused(const DTensor& down, const float* gate_up, int T, const int32_t* grouping, float* s, float* h,
                         void* h_q8, int64_t h_q8_stride, Stream stream) {
  using namespace moe_detail;
  const std::string where = "cuda: shared_down_fused(T=" + std::to_string(T) + "): ";
  if (!shared_down_fused_supports(down, T)) return Status::error(where + "the down type or shape is not served");
  if (gate_up == nullptr || grouping == nullptr || s == nullptr || h == nullptr || h_q8 == nullptr)
    return Status::error(where + "null gate_up, grouping, s, h or h_q8");
  if (!aligned(gate_up, 16) || !aligned(h, 16) || !aligned(h_q8, 16) || h_q8_stride % 16 != 0 ||
      h_q8_stride < down.cols / 32 * 36)
    return Status::error(where + "gate_up, h and h_q8 must be 16-byte aligned, h_q8_stride a multiple of 16 >= one q8_1 row");
  return launch_grouped_direct(down.type, shared_down_args(down, gate_up, T, grouping, s, h, h_q8, h_q8_stride), 1,
                               stream);
}

}  // namespace strata::cuda
