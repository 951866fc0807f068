// The engine's Backend over cuda::Decoder (include/strata/engine/backend.h). With
// BackendOptions::mtp on a model with an MTP block it drafts with the decoder's MTP head
// (has_mtp() true), else has_mtp() is false and drafts come from prompt lookup. Host-only.
#pragma once

#include <memory>

#include "strata/common/status.h"
#include "strata/engine/backend.h"
#include "strata/reference/model.h"

namespace strata::cuda {

Result<std::unique_ptr<engine::Backend>> create_engine_backend(const reference::Model& model,
                                                               const engine::BackendOptions& options);

}  // namespace strata::cuda
