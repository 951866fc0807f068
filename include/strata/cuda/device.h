// The GPUs this process sees, and the memory-read roof of one of them, measured rather
// than taken from a datasheet (the bench's roof_fraction divides by it). Host-only header:
// the CLI and engine include this, never CUDA headers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "strata/common/status.h"

namespace strata::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
  size_t l2_bytes = 0;
};

// Every visible device. With none (no GPU, or no usable driver) the error begins "no CUDA device"
// and quotes the runtime's reason; other errors name the CUDA call that failed.
Result<std::vector<DeviceInfo>> list_devices();

// OK when device `index` exists; otherwise the same "no CUDA device" error, or one naming the
// index and how many devices there are.
Status check_device(int index);

struct BandwidthResult {
  size_t bytes_per_pass = 0;   // bytes read by one pass of the probe
  int passes = 0;
  double median_ms = 0.0;      // one pass, median over `passes`
  double read_gb_s = 0.0;      // bytes_per_pass / median, in 1e9 bytes/s
};

// Reads a `bytes`-sized buffer of random words with a grid-stride sum, timed with events;
// warm-up first, buffer well over the L2 so the number is device memory, not cache.
Result<BandwidthResult> measure_read_bandwidth(int device, size_t bytes, int passes);

}  // namespace strata::cuda
