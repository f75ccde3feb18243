// Low-bit shadow copies of a model's layer matrices, for drafting (M12; SubSpec's draft model):
// every layer runs, as in the target, but from a smaller type, so a draft step reads fewer bytes
// and, unlike early exit or layer skipping, keeps every layer's contribution. The copies are made
// once from the matrices' exact decode with strata's reference quantisers (quant_kernels.h), so a
// shadow of a Q3_K_M file at q2_K is what `strata quantize` would give from the dequantised file.
// Norms, the embedding and the head stay the model's: the head decides the drafted token, and it
// is one matrix of many (the engines keep it resident).
#pragma once

#include <cstdint>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"
#include "model/model_spec.h"
#include "model/model_weights.h"

namespace strata::runtime {

struct ShadowWeights {
  GgmlType type = GgmlType::F32;
  model::ModelWeights weights;                // the model's, with every layer matrix the shadow's
  std::vector<std::vector<uint8_t>> storage;  // the requantised matrices the views point into
  uint64_t bytes = 0;                         // of storage
  uint32_t kept = 0;  // matrices left in the model's type (rows that do not divide into the type's blocks)
};

// Requantises every layer matrix of `w` to `type`. A matrix whose rows are not whole blocks of
// `type` keeps the model's (counted in kept); a matrix already of `type` is shared. Errors: a
// type strata cannot quantise to, a matrix it cannot decode on the CPU, no matrix requantised.
Result<ShadowWeights> make_shadow_weights(const model::ModelWeights& w, const model::ModelSpec& spec, GgmlType type);

}  // namespace strata::runtime
