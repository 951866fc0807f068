// The host side of the launch helpers (launch.cuh), for the host compiler too (the decoder's
// .cpp files): whether launches ask for programmatic dependent launch (PDL), and the launches
// that must not.
#pragma once

#include <cuda_runtime.h>

namespace strata::cuda {

// Whether the current device's compute capability major is >= `major`; asked once per device.
bool device_cc_major_at_least(int major);

// Whether launch_kernel() asks for PDL: on compute capability >= 9.0 unless the environment sets
// STRATA_PDL=0 (launch.cu). Decided once per process.
bool pdl_enabled();

// The next launch_kernel*() on `stream` from this thread goes without the PDL attribute, so that
// it depends in full on all the stream's earlier work. A caller marks the stream after a stream
// operation that is not a kernel (a copy, a memset): griddepcontrol.wait only waits for the grids
// that are the kernel's predecessors, and a programmatic edge exists only from one kernel to the
// next one (CUDA graphs: between two kernel nodes), so the kernel after a copy must not start on
// an edge whose wait does not cover the copy. After cudaStreamWaitEvent on another stream's
// kernel (a join) the attribute may stay: the other stream's kernel is then a full predecessor
// (eager) or a programmatic one whose grid the wait covers too (captured); the decoder keeps it
// where that measured faster (decoder_window.cpp, join). With PDL off this does nothing.
void pdl_full_dependency_next(cudaStream_t stream);

// Whether this launch on `stream` may take the PDL attribute: pdl_enabled() and no full
// dependency pending for the stream (a pending one is taken by this call).
bool pdl_launch_allowed(cudaStream_t stream);

}  // namespace strata::cuda
