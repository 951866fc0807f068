// `strata parity`: every CUDA kernel of the decode path against the CPU reference on fresh random
// inputs, one self-describing line per case (ggml style), optional timing. The rules (what is
// compared, with which bound) are in docs/PARITY.md. Host-only header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/common/status.h"

namespace strata::cuda {

struct ParityOptions {
  int device = 0;
  uint64_t seed = 0x5EED2026u;  // every case derives its inputs from (seed, case parameters)
  std::string filter;           // run only cases whose line starts with / contains this text
  int shard_index = 0;          // run only the cases whose line hashes to this shard ...
  int shard_count = 1;          // ... of this many (parallel processes share one run)
  std::string json_path;        // write every case's result here ("" = none)
  bool bench = false;           // time each mmvq case that passed
  int bench_reps = 20;          // timed rounds per case (median reported)
  bool host_only = false;       // only the host check of the decoders (no GPU needed)
  std::vector<std::string> models;  // GGUF files for the whole-step decoder checks (decoder_*)
  bool synth_slices = false;    // decoder stage check on a 4-layer, 16-expert slice of every recipe
};

struct ParitySummary {
  int passed = 0;
  int failed = 0;
  int skipped = 0;
};

// Prints one line per case to stdout and a summary; an error means the harness itself could not
// run (no device, out of memory), not that a case failed.
Result<ParitySummary> run_parity(const ParityOptions& options);

}  // namespace strata::cuda
