// The engine's Backend over cuda::Decoder (include/strata/engine/backend.h). The decoder has no
// MTP head yet, so this backend drafts by prompt lookup only (has_mtp() is false). Host-only.
#pragma once

#include <memory>

#include "strata/common/status.h"
#include "strata/engine/backend.h"
#include "strata/reference/model.h"

namespace strata::cuda {

Result<std::unique_ptr<engine::Backend>> create_engine_backend(const reference::Model& model,
                                                               const engine::BackendOptions& options);

}  // namespace strata::cuda
