// native_expert_grouped (moe.h): the window's T x k routed entries grouped by expert on the
// device, then gate/up per group, SwiGLU + q8_1 over the entries, down per group, and each row's
// weighted sum in ascending expert id. The quantized per-group mat-vec is moe_grouped.cuh's
// (one generated instance per weight type); this file holds the grouping, the float-weight
// variant, the combine and the host entry.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "moe.h"
#include "moe_grouped.cuh"

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

// One CTA, thread i = entry (row i / k, slot i % k). The sorted position of an entry is its rank
// under (expert, i): the number of entries before it in that order, so positions are a
// permutation and entries of one expert keep their row order. Its rank within its own row under
// the same order puts row t's entries in ascending expert id at row_entries[t * k ..].
__global__ void __launch_bounds__(kMaxExpertEntries) group_entries_kernel(
    const int32_t* __restrict__ ids, const float* __restrict__ weights, int n, int k, int n_expert,
    int* __restrict__ n_groups, int* __restrict__ group_expert, int* __restrict__ group_start,
    int* __restrict__ entry_row, float* __restrict__ entry_weight, int* __restrict__ row_entries) {
  __shared__ int expert_of[kMaxExpertEntries];  // by entry
  __shared__ int sorted[kMaxExpertEntries];     // expert by sorted position
  __shared__ int starts[kMaxExpertEntries];     // 1 where a group starts
  const int i = threadIdx.x;
  int e = 0;
  if (i < n) {
    // Router ids are in range; the clamp only keeps a corrupt id from reading outside the tensors.
    e = min(max(static_cast<int>(ids[i]), 0), n_expert - 1);
    expert_of[i] = e;
  }
  __syncthreads();
  if (i < n) {
    const int row = i / k;
    int pos = 0, row_rank = 0;
    for (int m = 0; m < n; ++m) {
      const int em = expert_of[m];
      const int before = em < e || (em == e && m < i);
      pos += before;
      if (m / k == row) row_rank += before;
    }
    sorted[pos] = e;
    entry_row[pos] = row;
    entry_weight[pos] = weights[i];
    row_entries[row * k + row_rank] = pos;
  }
  __syncthreads();
  if (i < n) starts[i] = i == 0 || sorted[i - 1] != sorted[i];
  __syncthreads();
  if (i < n && starts[i]) {
    int gi = 0;
    for (int m = 0; m < i; ++m) gi += starts[m];
    group_expert[gi] = sorted[i];
    group_start[gi] = i;
  }
  if (i == 0) {
    int total = 0;
    for (int m = 0; m < n; ++m) total += starts[m];
    *n_groups = total;
    group_start[total] = n;
  }
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
    case Type::F32: grouped_mmvf_kernel<Type::F32><<<grid, kThreads, 0, stream>>>(a); break;
    case Type::F16: grouped_mmvf_kernel<Type::F16><<<grid, kThreads, 0, stream>>>(a); break;
    case Type::BF16: grouped_mmvf_kernel<Type::BF16><<<grid, kThreads, 0, stream>>>(a); break;
    default: return Status::error("cuda: native_expert_grouped: no float kernel for " + type_name(t));
  }
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

// ---- the routed sum ----------------------------------------------------------------------------------

constexpr int kCombineThreads = 256;

// y[t, j] = sum over row t's entries in ascending expert id of out[entry, j] * weight, from 0 and
// rounded step by step as the reference's `dst[j] += out * w`.
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const float* __restrict__ out, int H, int k,
                                                                  const int* __restrict__ row_entries,
                                                                  const float* __restrict__ entry_weight,
                                                                  float* __restrict__ y) {
  const int t = blockIdx.y;
  const int j = blockIdx.x * kCombineThreads + threadIdx.x;
  if (j >= H) return;
  float acc = 0.0f;
  for (int r = 0; r < k; ++r) {
    const int p = row_entries[t * k + r];
    acc = __fadd_rn(acc, __fmul_rn(out[static_cast<int64_t>(p) * H + j], entry_weight[p]));
  }
  y[static_cast<int64_t>(t) * H + j] = acc;
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

// One grouped mat-vec: quantized types on grouped_mmvq_kernel, float types on grouped_mmvf_kernel.
Status launch_grouped(Type t, const GroupedArgs& a, int group_rows, const DeviceInfo& dev, cudaStream_t stream) {
  if (is_float_type(t)) {
    const dim3 grid(static_cast<unsigned>((a.rows + kWarps - 1) / kWarps), static_cast<unsigned>(group_rows));
    return launch_grouped_f(t, a, grid, stream);
  }
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

Status native_expert_grouped(const ExpertWeights& w, const Act& u, const int32_t* ids, const float* weights, int k,
                             const ExpertScratch& scratch, float* y, Stream stream) {
  using namespace moe_detail;
  const std::string where = "cuda: native_expert_grouped(T=" + std::to_string(u.T) + ", k=" + std::to_string(k) + "): ";
  STRATA_TRY(check_weights(w));
  const DTensor& gu_t = w.gate_up ? w.gate_up : w.gate;
  const Type gt = gu_t.type, dt = w.down.type;
  const int T = u.T;
  if (T < 1 || T > kMaxWindowRows) return Status::error(where + "T must be in 1.." + std::to_string(kMaxWindowRows));
  if (k < 1 || k > w.n_expert) return Status::error(where + "k must be in 1..n_expert");
  const int n = T * k;
  if (n > kMaxExpertEntries) return Status::error(where + "T * k exceeds " + std::to_string(kMaxExpertEntries));
  if (n > scratch.cap_entries) return Status::error(where + "T * k exceeds the scratch's cap_entries " + std::to_string(scratch.cap_entries));
  const ExpertScratchLayout l = expert_scratch_layout(w, scratch.cap_entries);
  if (scratch.base == nullptr || !aligned(scratch.base, 256) || scratch.bytes < l.bytes)
    return Status::error(where + "scratch must be 256-byte aligned with at least " + std::to_string(l.bytes) + " bytes");
  if (ids == nullptr || weights == nullptr || y == nullptr) return Status::error(where + "null ids, weights or y");
  if (u.cols != w.n_embd) return Status::error(where + "u has " + std::to_string(u.cols) + " columns, n_embd is " + std::to_string(w.n_embd));
  const bool q8_in = mmvq_takes_q8_1(gt);
  if (q8_in) {
    if (u.q8 == nullptr || !aligned(u.q8, 16) || u.q8_stride % 16 != 0 || u.q8_stride < w.n_embd / 32 * 36)
      return Status::error(where + "u.q8 must be set, 16-byte aligned, with q8_stride a multiple of 16 >= one q8_1 row");
  } else if (u.f32 == nullptr || !aligned(u.f32, 16) || u.f32_stride % 4 != 0 || u.f32_stride < w.n_embd) {
    return Status::error(where + "u.f32 must be 16-byte aligned with f32_stride a multiple of 4 >= n_embd");
  }
  auto dev = current_device();
  if (!dev) return dev.status();
  if ((!is_float_type(gt) || !is_float_type(dt)) && dev->cc < 75)
    return Status::error(where + "quantized experts need compute capability 7.5 or newer (int8 tensor cores)");

  uint8_t* base = static_cast<uint8_t*>(scratch.base);
  int* n_groups = reinterpret_cast<int*>(base + l.n_groups);
  int* group_expert = reinterpret_cast<int*>(base + l.group_expert);
  int* group_start = reinterpret_cast<int*>(base + l.group_start);
  int* entry_row = reinterpret_cast<int*>(base + l.entry_row);
  float* entry_weight = reinterpret_cast<float*>(base + l.entry_weight);
  int* row_entries = reinterpret_cast<int*>(base + l.row_entries);
  float* gate_up = reinterpret_cast<float*>(base + l.gate_up);
  float* h = reinterpret_cast<float*>(base + l.h);
  uint8_t* h_q8 = base + l.h_q8;
  float* out = reinterpret_cast<float*>(base + l.out);
  const cudaStream_t s = stream;
  // At most n groups in this call; block rows beyond the call's groups return at once.
  const int group_rows = n < kGroupRows ? n : kGroupRows;

  group_entries_kernel<<<1, kMaxExpertEntries, 0, s>>>(ids, weights, n, k, w.n_expert, n_groups, group_expert, group_start,
                                                       entry_row, entry_weight, row_entries);
  STRATA_CUDA_TRY(cudaGetLastError());

  GroupedArgs a;
  a.n_groups = n_groups;
  a.group_expert = group_expert;
  a.group_start = group_start;
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
  a.act_row = entry_row;
  a.batch = T < kBatch ? T : kBatch;
  a.out = gate_up;
  a.out_stride = 2 * w.n_ff;
  STRATA_TRY(launch_grouped(gt, a, group_rows, *dev, s));

  const bool q8_mid = mmvq_takes_q8_1(dt);
  STRATA_TRY(swiglu_entries(gate_up, n, w.n_ff, n_groups, group_start, h, q8_mid ? h_q8 : nullptr, l.h_q8_stride, stream));

  a.w0 = a.w1 = static_cast<const uint8_t*>(w.down.data);
  a.rows = w.n_embd;
  a.split = a.rows;
  a.stride0 = a.stride1 = w.n_embd;
  a.row_bytes = w.down.row_bytes;
  a.nchunks = w.n_ff / 32;
  a.act = q8_mid ? h_q8 : reinterpret_cast<const uint8_t*>(h);
  a.act_stride = q8_mid ? l.h_q8_stride : w.n_ff * static_cast<int64_t>(sizeof(float));
  a.act_row = nullptr;  // entry i's h is row i
  a.out = out;
  a.out_stride = w.n_embd;
  STRATA_TRY(launch_grouped(dt, a, group_rows, *dev, s));

  const dim3 grid(static_cast<unsigned>((w.n_embd + kCombineThreads - 1) / kCombineThreads), static_cast<unsigned>(T));
  combine_kernel<<<grid, kCombineThreads, 0, s>>>(out, w.n_embd, k, row_entries, entry_weight, y);
  STRATA_CUDA_TRY(cudaGetLastError());
  return Status::ok_status();
}

}  // namespace strata::cuda
