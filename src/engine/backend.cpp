// Choosing the backend for a device: the reference here; the CUDA backend lives in the cuda
// module (include/strata/cuda/engine_backend.h), which the CLI links when CUDA is built.
#include "strata/engine/backend.h"

#include "strata/engine/reference_backend.h"

namespace strata::engine {

Result<std::unique_ptr<Backend>> create_backend(const reference::Model& model, const BackendOptions& options) {
  if (options.device == Device::Cpu) return std::unique_ptr<Backend>(std::make_unique<ReferenceBackend>(model, options));
  return Status::error("engine: --device cuda: this strata was built without CUDA (configure with -DSTRATA_CUDA=ON)");
}

}  // namespace strata::engine
