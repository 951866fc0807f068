// A qwen4exp file opened for the reference forward: the mapped GGUF, its validated
// ModelConfig and LayerPlan, the bound Weights and the worker pool. Opening is the recipe
// of DESIGN.md: map the file, validate the config, bind the weights.
#pragma once

#include <memory>
#include <string>

#include "strata/common/status.h"
#include "strata/gguf/gguf.h"
#include "strata/model/config.h"
#include "strata/model/weights.h"
#include "strata/reference/thread_pool.h"

namespace strata::reference {

class Model {
 public:
  // threads <= 0: one per hardware thread.
  static Result<std::unique_ptr<Model>> open(const std::string& path, int threads = 0);

  const gguf::Model& file() const { return file_; }
  const model::ModelConfig& config() const { return config_; }
  const model::Weights& weights() const { return weights_; }
  ThreadPool& pool() const { return *pool_; }

 private:
  Model() = default;
  gguf::Model file_;             // owns the mapping the weights point into
  model::ModelConfig config_;
  model::Weights weights_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace strata::reference
