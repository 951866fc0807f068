// The host memory-read roof, measured on this machine at start: a multi-threaded streaming
// read of a buffer several times the last-level cache, median of several passes. A datasheet
// number would flatter or insult the engine depending on DIMMs, channels and the VM; the
// roof fraction is only meaningful against what this machine actually reads.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/common/status.h"

namespace strata::bench {

struct BandwidthOptions {
  int threads = 0;           // 0: one per hardware thread
  uint64_t bytes = 0;        // 0: 4 x llc_bytes, at least 256 MiB, at most 2 GiB
  uint64_t llc_bytes = 0;    // from MachineInfo; 0: assume 32 MiB
  int passes = 9;            // timed passes after one untimed warm-up pass
};

struct Bandwidth {
  double gb_s = 0.0;                 // median pass, 1e9 bytes per second
  std::vector<double> passes_gb_s;   // every timed pass, in order
  uint64_t buffer_bytes = 0;
  int threads = 0;
  const char* kernel = "";           // "avx2" or "scalar": which read loop ran
  double bytes_per_s() const { return gb_s * 1e9; }
};

// The buffer size the options resolve to (exposed for tests and the report).
uint64_t probe_buffer_bytes(const BandwidthOptions& options);

Result<Bandwidth> measure_host_bandwidth(const BandwidthOptions& options);

// Median of a non-empty list (mean of the middle two for even sizes).
double median(std::vector<double> values);

}  // namespace strata::bench
