#include "runtime/model.h"

namespace strata::runtime {

Result<std::shared_ptr<const Model>> Model::load(const std::string& path) {
  auto file = gguf::File::open(path);
  if (!file) return file.status();
  auto m = std::make_shared<Model>(Model{std::move(file.value()), {}, {}});
  auto spec = model::spec_from_gguf(m->file);
  if (!spec) return spec.status();
  m->spec = std::move(spec.value());
  // The weights point into m->file's mapping, which does not move from here on.
  auto weights = model::load_weights(m->file, m->spec);
  if (!weights) return weights.status();
  m->weights = std::move(weights.value());
  return std::shared_ptr<const Model>(std::move(m));
}

}  // namespace strata::runtime
