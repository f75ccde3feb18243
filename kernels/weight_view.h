// A view of a 2-D weight matrix in any GGML type: n_out rows of n_in elements, row-major, rows
// row_bytes apart. Kernels compute on views and own nothing; the memory belongs to whoever made
// the view (a memory-mapped GGUF, a VRAM arena).
//
// layout: kGguf (default) = GGUF blocks, row r at data + r * row_bytes. kGpu = the repacked GPU
// layout of kernels/gpu_layout.h (8-row tiles; row() is not meaningful there, row_bytes is each
// row's share of the tiles; build such views with gpu_layout_view()). Only the CUDA kernels take
// kGpu views; the CPU kernels take kGguf only.
#pragma once

#include <cstdint>

#include "core/ggml_type.h"

namespace strata::kernels {

enum class WeightLayout : uint8_t { kGguf = 0, kGpu = 1 };

struct WeightView {
  const uint8_t* data = nullptr;
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0;   // ne[0]: elements per row
  int64_t n_out = 0;  // ne[1]: rows
  uint64_t row_bytes = 0;
  WeightLayout layout = WeightLayout::kGguf;

  const uint8_t* row(int64_t r) const { return data + uint64_t(r) * row_bytes; }
  bool empty() const { return data == nullptr; }
};

}  // namespace strata::kernels
