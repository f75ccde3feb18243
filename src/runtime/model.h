// A model ready to run: the memory-mapped GGUF, its ModelSpec and the weight views into it.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "model/gguf_file.h"
#include "model/model_spec.h"
#include "model/model_weights.h"

namespace strata::runtime {

struct Model {
  gguf::File file;  // owns the mapping the weights point into
  model::ModelSpec spec;
  model::ModelWeights weights;

  // Errors name the file and the problem: not GGUF, unsupported architecture, missing tensor,
  // wrong shape, type without kernels.
  static Result<std::shared_ptr<const Model>> load(const std::string& path);
};

}  // namespace strata::runtime
