// The register-direct mat-vec (mmvq_direct.cu) for Q4_K, Q5_K and IQ4_XS rows: mmvq() takes it
// whenever direct_supports() says the shape allows, and mmvq_decode_kernel otherwise.
#pragma once

#include <cuda_runtime.h>

#include "strata/common/status.h"
#include "strata/cuda/mmvq.h"
#include "strata/quant/types.h"

namespace strata::cuda::mmvq_detail {

struct Shape;
struct DeviceCaps;

bool direct_supports(quant::Type type, const Shape& p);
Result<MmvqPlan> plan_direct(quant::Type type, const Shape& p, const DeviceCaps& caps);
Status launch_direct(quant::Type type, const Shape& p, const MmvqPlan& plan, cudaStream_t stream);

}  // namespace strata::cuda::mmvq_detail
