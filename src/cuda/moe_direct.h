// The register-direct grouped expert mat-vec (moe_direct.cu) as moe_grouped.cu's launcher sees
// it: which calls it takes, and its launch.
#pragma once

#include "moe_combine.cuh"
#include "moe_grouped.cuh"

namespace strata::cuda::moe_detail {

// Whether grouped_direct_kernel serves this call: IQ3_XXS, Q2_0, IQ4_NL or Q5_1 weights of whole
// blocks in 4-byte aligned rows, with the activation tile within 48 KB of shared memory, unless
// the environment sets STRATA_GROUPED_DIRECT=0.
bool grouped_direct_supports(Type t, const GroupedArgs& a);

// The routed sum folded into the down call: the CTAs of a column tile (one per block row) count
// themselves done in tile_count[tile], and the last one forms the tile's columns of the routed
// sum (moe_combine.cuh) for every window row, so no combine launch follows the down call.
// tile_count: grouped_direct_tiles() words, zero before the launch and left zero after it.
struct CombineTail {
  RoutedSum sum;  // sum.out must be the call's `out` (a.out with a.out_stride == sum.H)
  int T = 0;
  unsigned* tile_count = nullptr;
};

// Column tiles of a call (the grid's x extent): the counters a CombineTail needs.
int grouped_direct_tiles(Type t, const GroupedArgs& a);

// Launches it with group_rows block rows (moe_grouped.cu's grid contract); with tail, the routed
// sum as well.
Status launch_grouped_direct(Type t, const GroupedArgs& a, int group_rows, cudaStream_t stream,
                             const CombineTail* tail = nullptr);

}  // namespace strata::cuda::moe_detail
