// The register-direct tensor-core mat-vec (mmvq_mma.cu) for Q4_K, Q5_K and IQ4_XS rows: mmvq()
// takes it where mma_supports() says the shape allows and mma_preferred() that it is the faster
// kernel (STRATA_MMVQ_MMA=0: never).
#pragma once

#include <cuda_runtime.h>

#include "strata/common/status.h"
#include "strata/cuda/mmvq.h"
#include "strata/quant/types.h"

namespace strata::cuda::mmvq_detail {

struct Shape;
struct DeviceCaps;

bool mma_supports(quant::Type type, const Shape& p);
bool mma_preferred(const Shape& p);
Result<MmvqPlan> plan_mma(quant::Type type, const Shape& p, const DeviceCaps& caps);
Status launch_mma(quant::Type type, const Shape& p, const MmvqPlan& plan, cudaStream_t stream);

}  // namespace strata::cuda::mmvq_detail
