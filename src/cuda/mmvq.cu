// mmvq: the public entry (shape and alignment checks, type dispatch) and the host helpers the
// per-type launchers share (device capabilities, occupancy cache). The kernels are in mmvq.cuh
// (instantiated one type per generated file) and mmvf.cu.
#include "strata/cuda/mmvq.h"

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "mmvq.cuh"
#include "mmvq_direct.h"
#include "mmvq_mma.h"
#include "strata/cuda/switches.h"

namespace strata::cuda {
namespace mmvq_detail {

// Tensor-core int8 mma needs Turing or newer (mma_s8_16x8x32).
constexpr int kMinComputeCapability = 75;

Result<DeviceCaps> device_caps() {
  static std::mutex mu;
  static std::vector<DeviceCaps> cache;  // index: device id; sm_count 0 = not queried yet
  int device = 0;
  STRATA_CUDA_TRY(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(cache.size()) <= device) cache.resize(static_cast<size_t>(device) + 1);
  DeviceCaps& c = cache[static_cast<size_t>(device)];
  if (c.sm_count == 0) {
    int sms = 0, major = 0, minor = 0, optin = 0;
    STRATA_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    STRATA_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    STRATA_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    STRATA_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    c.device = device;
    c.sm_count = sms;
    c.cc = 10 * major + minor;
    c.smem_optin = static_cast<size_t>(optin);
  }
  return c;
}

Result<int> occupancy(const void* kernel, int threads, size_t smem, const DeviceCaps& caps) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, size_t>, int> cache;
  static std::set<std::pair<const void*, int>> raised;  // (kernel, device) whose limit was raised
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(kernel, caps.device, smem);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // Over 48 KB of dynamic shared memory needs an opt-in per kernel and device, up to the device
  // limit minus the kernel's static shared memory.
  if (smem > 48 * 1024 && raised.insert({kernel, caps.device}).second) {
    cudaFuncAttributes attr{};
    STRATA_CUDA_TRY(cudaFuncGetAttributes(&attr, kernel));
    STRATA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(caps.smem_optin - attr.sharedSizeBytes)));
  }
  int blocks = 0;
  STRATA_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
  cache[key] = blocks;
  return blocks;
}

static_assert(kMT == 1, "plan_split's row groups are 16 rows (mmvq_decode_kernel's at MT = 1, mmvq_mma_kernel's)");

Result<MmvqPlan> plan_split(const char* name, const void* kernel, const LaunchShape& s,
                            const std::function<size_t(int, int)>& smem, const DeviceCaps& caps) {
  MmvqPlan best;
  double best_cost = 0.0;
  int64_t best_spread = 0;
  for (int ks = 1; ks <= kMaxWarps; ++ks) {
    if (ks > 1 && ks > s.nsteps) break;  // every K-part has a step
    for (int groups = 1; groups * ks <= kMaxWarps; groups *= 2) {
      const int warps = groups * ks;
      if (groups > 1 && groups / 2 >= s.row_groups) break;  // keep at least half of the row groups busy
      const size_t bytes = smem(warps, ks);
      if (bytes > caps.smem_optin) continue;
      auto occ = occupancy(kernel, warps * 32, bytes, caps);
      if (!occ) return occ.status();
      if (*occ <= 0) continue;
      const double cost = launch_cost(s, groups, ks, *occ);
      const int64_t ctas = (s.row_groups + groups - 1) / groups;
      const int64_t spread = ctas < caps.sm_count ? ctas : caps.sm_count;
      const bool better = best.grid == 0 || cost < best_cost - 1e-9 || (cost < best_cost + 1e-9 && spread > best_spread);
      if (better) {
        best_cost = cost;
        best_spread = spread;
        best.kernel = name;
        best.threads = warps * 32;
        best.grid = static_cast<int>(ctas);
        best.ksplit = ks;
        best.rows_per_tile = groups * 16;
        best.ctas_per_sm = *occ;
        best.smem_bytes = bytes;
      }
    }
  }
  if (best.grid == 0) return Status::error(std::string("cuda: ") + name + ": no launch configuration fits this device's shared memory");
  return best;
}

}  // namespace mmvq_detail

namespace {

using quant::Type;

bool is_float_type(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16; }

std::string type_name(Type t) {
  const auto info = quant::type_info(t);
  return info ? std::string(info->name) : "type id " + std::to_string(static_cast<uint32_t>(t));
}

// Validates `a` and fills the kernel's view of it.
Result<mmvq_detail::Shape> check(const MmvqArgs& a) {
  const std::string where = "cuda: mmvq(type=" + type_name(a.type) + ", rows=" + std::to_string(a.rows) +
                            ", cols=" + std::to_string(a.cols) + ", T=" + std::to_string(a.T) + "): ";
  const auto fail = [&](const std::string& what) { return Status::error(where + what); };
  if (!mmvq_supports(a.type)) return fail("unsupported weight type");
  const auto info = *quant::type_info(a.type);
  if (a.cols <= 0 || a.cols % 32 != 0 || a.cols % info.block_size != 0)
    return fail("cols must be a positive multiple of 32 and of the block size " + std::to_string(info.block_size));
  if (a.rows < 0 || a.rows > (1 << 30)) return fail("rows out of range");
  if (a.cols > (1 << 26)) return fail("cols out of range");
  if (a.T < 1 || a.T > kMaxWindowRows) return fail("T must be in 1.." + std::to_string(kMaxWindowRows));
  if (reinterpret_cast<uintptr_t>(a.weights) % 16 != 0) return fail("weights must be 16-byte aligned");
  if (reinterpret_cast<uintptr_t>(a.act) % 16 != 0 || a.act_stride % 16 != 0)
    return fail("act must be 16-byte aligned with a stride that is a multiple of 16 bytes (stride " +
                std::to_string(a.act_stride) + ")");
  const int64_t act_row = is_float_type(a.type) ? a.cols * 4 : a.cols / 32 * mmvq_detail::kActBlockBytes;
  if (a.T > 1 && a.act_stride < act_row)
    return fail("act_stride " + std::to_string(a.act_stride) + " is shorter than one activation row (" +
                std::to_string(act_row) + " bytes)");
  if (a.y == nullptr || reinterpret_cast<uintptr_t>(a.y) % 4 != 0) return fail("y must be a 4-byte aligned pointer");
  if (a.T > 1 && a.y_stride < a.rows) return fail("y_stride must be >= rows");
  mmvq_detail::Shape p;
  p.w = static_cast<const uint8_t*>(a.weights);
  p.row_bytes = a.cols / info.block_size * info.type_size;
  p.rows = static_cast<int>(a.rows);
  p.nchunks = static_cast<int>(a.cols / 32);
  p.act = static_cast<const uint8_t*>(a.act);
  p.act_stride = a.act_stride;
  p.T = a.T;
  p.y = a.y;
  p.y_stride = a.y_stride;
  return p;
}

// Which kernel a call takes: Q4_K / Q5_K / IQ4_XS rows on mmvq_mma_kernel where it is the faster
// (mma_preferred), else on mmvq_direct_kernel where that can take them, and every other
// quantized type through mmvq_decode_kernel.
enum class Route { kMma, kDirect, kOther };  // kOther: mmvq_decode_kernel, or mmvf for float weights
Route route_for(Type type, const mmvq_detail::Shape& p) {
  if (switches().mmvq_mma && mmvq_detail::mma_supports(type, p) && mmvq_detail::mma_preferred(p)) return Route::kMma;
  if (mmvq_detail::direct_supports(type, p)) return Route::kDirect;
  return Route::kOther;
}

Result<MmvqPlan> plan_for(Type type, const mmvq_detail::Shape& p, const mmvq_detail::DeviceCaps& caps) {
  switch (route_for(type, p)) {
    case Route::kMma: return mmvq_detail::plan_mma(type, p, caps);
    case Route::kDirect: return mmvq_detail::plan_direct(type, p, caps);
    case Route::kOther: break;
  }
  switch (type) {
#define STRATA_CASE(name) \
  case Type::name: return mmvq_detail::plan_quant<Type::name>(p, caps);
    STRATA_MMVQ_QUANT_TYPES(STRATA_CASE)
#undef STRATA_CASE
    default:
      return mmvq_detail::plan_float(type, p, caps);
  }
}

}  // namespace

bool mmvq_supports(quant::Type type) { return mmvq_takes_q8_1(type) || is_float_type(type); }

// The q8_1 set is defined once, in the quant module, so the reference's engine activation
// numerics (reference/matmul.h) cannot drift from the kernels. The kernel list and the predicate
// must name the same types: each kernel type takes q8_1, and there are as many kernel types.
#define STRATA_CASE(name) &&quant::takes_q8_1_activations(Type::name)
static_assert(true STRATA_MMVQ_QUANT_TYPES(STRATA_CASE),
              "a type of STRATA_MMVQ_QUANT_TYPES is missing from quant::takes_q8_1_activations");
#undef STRATA_CASE
#define STRATA_CASE(name) +1
static_assert(0 STRATA_MMVQ_QUANT_TYPES(STRATA_CASE) == quant::count_q8_1_activation_types(),
              "quant::takes_q8_1_activations names a type without an mmvq kernel");
#undef STRATA_CASE

bool mmvq_takes_q8_1(quant::Type type) { return quant::takes_q8_1_activations(type); }

Result<MmvqPlan> mmvq_plan(const MmvqArgs& args) {
  auto shape = check(args);
  if (!shape) return shape.status();
  auto caps = mmvq_detail::device_caps();
  if (!caps) return caps.status();
  if (caps->cc < mmvq_detail::kMinComputeCapability)
    return Status::error("cuda: mmvq: needs compute capability 7.5 or newer (int8 tensor cores), device has " +
                         std::to_string(caps->cc / 10) + "." + std::to_string(caps->cc % 10));
  return plan_for(args.type, *shape, *caps);
}

Status mmvq(const MmvqArgs& args, Stream stream) {
  auto shape = check(args);
  if (!shape) return shape.status();
  if (args.rows == 0) return Status::ok_status();
  auto caps = mmvq_detail::device_caps();
  if (!caps) return caps.status();
  if (caps->cc < mmvq_detail::kMinComputeCapability)
    return Status::error("cuda: mmvq: needs compute capability 7.5 or newer (int8 tensor cores)");
  auto plan = plan_for(args.type, *shape, *caps);
  if (!plan) return plan.status();
  switch (route_for(args.type, *shape)) {
    case Route::kMma: return mmvq_detail::launch_mma(args.type, *shape, *plan, stream);
    case Route::kDirect: return mmvq_detail::launch_direct(args.type, *shape, *plan, stream);
    case Route::kOther: break;
  }
  switch (args.type) {
#define STRATA_CASE(name) \
  case Type::name: return mmvq_detail::launch_quant<Type::name>(*shape, *plan, stream);
    STRATA_MMVQ_QUANT_TYPES(STRATA_CASE)
#undef STRATA_CASE
    default:
      return mmvq_detail::launch_float(args.type, *shape, *plan, stream);
  }
}

}  // namespace strata::cuda
