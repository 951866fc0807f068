// Device listing and the memory-read bandwidth probe.
//
// The probe is a grid-stride sum over 16-byte loads: the sum is written out so the compiler
// cannot drop the loads, and the buffer is filled with random words (never zeros, see
// METHOD: zeros can read faster than real data through compression).
#include "strata/cuda/device.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common.cuh"

namespace strata::cuda {
namespace {

__global__ void fill_random_words_kernel(uint4* data, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    // xorshift-multiply hash of the index: cheap, well mixed, deterministic.
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 16; h *= 0x85EBCA6Bu; h ^= h >> 13; h *= 0xC2B2AE35u; h ^= h >> 16;
    data[i] = make_uint4(h, h * 3u + 1u, h ^ 0xA5A5A5A5u, h + 0x3C6EF372u);
  }
}

__global__ void read_sum_kernel(const uint4* data, size_t n, uint32_t* out) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint4 v = __ldcs(data + i);  // streaming load: the data is read once per pass
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

// Frees on every path out of measure_read_bandwidth.
struct ProbeBuffers {
  uint4* data = nullptr;
  uint32_t* sum = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~ProbeBuffers() {
    if (data) cudaFree(data);
    if (sum) cudaFree(sum);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

// How many devices the runtime sees. When it cannot count them (no GPU, no driver, a driver too
// old for this runtime, no access to the device nodes) no device is usable: one error in words,
// the runtime's reason quoted, rather than a failed call's name.
Result<int> device_count() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  const std::string hint = " (this needs an NVIDIA GPU and its driver)";
  if (e != cudaSuccess) return Status::error(std::string("no CUDA device: ") + cudaGetErrorString(e) + hint);
  if (count == 0) return Status::error("no CUDA device: the driver reports none" + hint);
  return count;
}

}  // namespace

Status check_device(int index) {
  auto count = device_count();
  if (!count) return count.status();
  if (index < 0 || index >= *count)
    return Status::error("no CUDA device " + std::to_string(index) + ": the devices are 0.." + std::to_string(*count - 1));
  return Status::ok_status();
}

Result<std::vector<DeviceInfo>> list_devices() {
  auto counted = device_count();
  if (!counted) return counted.status();
  const int count = *counted;
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    STRATA_CUDA_TRY(cudaGetDeviceProperties(&prop, i));
    STRATA_CUDA_TRY(cudaSetDevice(i));
    DeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.cc_major = prop.major;
    info.cc_minor = prop.minor;
    info.sm_count = prop.multiProcessorCount;
    info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
    STRATA_CUDA_TRY(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
    devices.push_back(std::move(info));
  }
  return devices;
}

Result<BandwidthResult> measure_read_bandwidth(int device, size_t bytes, int passes) {
  if (passes < 1) return Status::error("cuda: bandwidth probe: expected passes >= 1, got " + std::to_string(passes));
  const size_t n = bytes / sizeof(uint4);
  if (n == 0) return Status::error("cuda: bandwidth probe: buffer of " + std::to_string(bytes) + " bytes is too small");
  STRATA_TRY(check_device(device));
  STRATA_CUDA_TRY(cudaSetDevice(device));
  cudaDeviceProp prop{};
  STRATA_CUDA_TRY(cudaGetDeviceProperties(&prop, device));

  ProbeBuffers buf;
  STRATA_CUDA_TRY(cudaMalloc(&buf.data, n * sizeof(uint4)));
  STRATA_CUDA_TRY(cudaMalloc(&buf.sum, sizeof(uint32_t)));
  STRATA_CUDA_TRY(cudaEventCreate(&buf.start));
  STRATA_CUDA_TRY(cudaEventCreate(&buf.stop));

  const int threads = 512;
  const int blocks = prop.multiProcessorCount * 4;  // enough loads in flight to saturate HBM
  fill_random_words_kernel<<<blocks, threads>>>(buf.data, n, 0x5EED1234u);
  STRATA_CUDA_TRY(cudaGetLastError());
  STRATA_CUDA_TRY(cudaMemset(buf.sum, 0, sizeof(uint32_t)));
  for (int w = 0; w < 3; ++w) read_sum_kernel<<<blocks, threads>>>(buf.data, n, buf.sum);  // warm-up
  STRATA_CUDA_TRY(cudaGetLastError());
  STRATA_CUDA_TRY(cudaDeviceSynchronize());

  std::vector<float> times(static_cast<size_t>(passes));
  for (int p = 0; p < passes; ++p) {
    STRATA_CUDA_TRY(cudaEventRecord(buf.start));
    read_sum_kernel<<<blocks, threads>>>(buf.data, n, buf.sum);
    STRATA_CUDA_TRY(cudaEventRecord(buf.stop));
    STRATA_CUDA_TRY(cudaEventSynchronize(buf.stop));
    STRATA_CUDA_TRY(cudaGetLastError());
    STRATA_CUDA_TRY(cudaEventElapsedTime(&times[static_cast<size_t>(p)], buf.start, buf.stop));
  }
  std::sort(times.begin(), times.end());
  BandwidthResult r;
  r.bytes_per_pass = n * sizeof(uint4);
  r.passes = passes;
  r.median_ms = times[times.size() / 2];
  r.read_gb_s = static_cast<double>(r.bytes_per_pass) / (r.median_ms * 1e-3) / 1e9;
  return r;
}

}  // namespace strata::cuda
