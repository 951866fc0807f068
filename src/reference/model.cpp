#include "strata/reference/model.h"

namespace strata::reference {

Result<std::unique_ptr<Model>> Model::open(const std::string& path, int threads) {
  std::unique_ptr<Model> m(new Model());
  auto file = gguf::Model::open(path);
  if (!file) return file.status();
  m->file_ = std::move(file.value());
  auto config = model::load_config(m->file_.metadata(), path);
  if (!config) return config.status();
  m->config_ = std::move(config.value());
  // Bound after the move: the views point into the mapping, which the gguf::Model keeps.
  auto weights = model::bind_weights(m->file_, m->config_);
  if (!weights) return weights.status();
  m->weights_ = std::move(weights.value());
  m->pool_ = std::make_unique<ThreadPool>(threads);
  return m;
}

}  // namespace strata::reference
