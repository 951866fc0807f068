// The STRATA_* environment switches of the CUDA decoder: each selects the other arm of a
// measurement (docs/BENCH.md lists them). They are read once per process. A value a switch does
// not know is refused, naming the variable and what it takes: check_switches() returns that
// error (the decoder's creation and `strata parity` call it), so a typo never silently runs the
// default. Host-only header.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata::cuda {

inline constexpr int kMaxAttnSplits = 512;  // STRATA_ATTN_SPLITS's bound: attn_combine_kernel's shared arrays

struct Switches {
  bool pdl = true;              // STRATA_PDL=0: no programmatic dependent launch (1: on, the default)
  bool side_stream = true;      // STRATA_SIDE_STREAM=0: every launch of a window on one stream
  bool grouped_direct = true;   // STRATA_GROUPED_DIRECT=0: routed experts on grouped_mmvq_kernel
  bool direct_wide_t1 = false;  // STRATA_DIRECT_WARPS=8: the direct experts' T = 1 CTAs of 8 warps (5: the default)
  bool direct_stage = true;     // STRATA_DIRECT_STAGE=0: the direct experts' T = 1 CTAs read their weights from
                                // global memory instead of a tile staged in shared memory
  bool mmvq_mma = true;         // STRATA_MMVQ_MMA=0: Q4_K / Q5_K / IQ4_XS mat-vecs never on mmvq_mma_kernel
  bool hc_post_blocked = true;  // STRATA_HC_POST_BLOCKED=0: hc_post_kernel for windows of more than one row too
  int attn_splits = 0;          // STRATA_ATTN_SPLITS=1..512: split-K CTAs per kv head (0: the default)
  bool unfuse_gdn_norm = false; // STRATA_UNFUSE=gdn-norm[,gdn-gates,combine,shared-down]
  bool unfuse_gdn_gates = false;  // STRATA_UNFUSE=gdn-gates[,...]: GDN's beta|alpha mat-vec a launch of its own
  bool unfuse_combine = false;  // STRATA_UNFUSE=combine[,...]
  bool unfuse_shared_down = false;  // STRATA_UNFUSE=shared-down[,...]: the shared expert's SwiGLU a launch of its own
};

// The switches as `lookup` (the environment's getenv, or a test's table) gives them.
Result<Switches> parse_switches(const std::function<const char*(const char*)>& lookup);

// This process's switches; where the environment holds a refused value, the defaults.
const Switches& switches();

// The environment's refused value, if any, as an error naming the variable.
Status check_switches();

}  // namespace strata::cuda
