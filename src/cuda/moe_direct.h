// The register-direct grouped expert mat-vec (moe_direct.cu) as moe_grouped.cu's launcher sees
// it: which calls it takes, and its launch.
#pragma once

#include "moe_grouped.cuh"

namespace strata::cuda::moe_detail {

// Whether grouped_direct_kernel serves this call: IQ3_XXS, Q2_0 or IQ4_NL weights of whole
// blocks in 4-byte aligned rows, with the activation tile within 48 KB of shared memory, unless
// the environment sets STRATA_GROUPED_DIRECT=0.
bool grouped_direct_supports(Type t, const GroupedArgs& a);

// Launches it with group_rows block rows (moe_grouped.cu's grid contract).
Status launch_grouped_direct(Type t, const GroupedArgs& a, int group_rows, cudaStream_t stream);

}  // namespace strata::cuda::moe_detail
