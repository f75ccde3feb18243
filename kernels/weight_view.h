// A view of a 2-D weight matrix in any GGML type: n_out rows of n_in elements, row-major, rows
// row_bytes apart. Kernels compute on views and own nothing; the memory belongs to whoever made
// the view (a memory-mapped GGUF, a VRAM arena).
#pragma once

#include <cstdint>

#include "core/ggml_type.h"

namespace strata::kernels {

struct WeightView {
  const uint8_t* data = nullptr;
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0;   // ne[0]: elements per row
  int64_t n_out = 0;  // ne[1]: rows
  uint64_t row_bytes = 0;

  const uint8_t* row(int64_t r) const { return data + uint64_t(r) * row_bytes; }
  bool empty() const { return data == nullptr; }
};

}  // namespace strata::kernels
