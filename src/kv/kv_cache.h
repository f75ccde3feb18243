// Per-layer K/V storage for one sequence (CPU). Sliding-window layers keep a ring of
// `window + margin` slots (the margin covers a prefill chunk or speculative draft written ahead of
// the queries that still need the oldest entries); full-attention layers keep `n_ctx` slots.
// The entry for position p lives in slot p % capacity. Storage is f32 or f16.
//
// This is the M2 reference store: contiguous, host memory. Paged, quantised and device-resident
// stores (M6) keep the same contract (write / view / truncate).
#pragma once

#include <cstdint>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"
#include "kernels/cpu/attention.h"

namespace strata::kv {

struct LayerShape {
  uint32_t width = 0;   // n_head_kv * head_dim values per position, for K and for V
  uint32_t window = 0;  // 0: full attention
};

class KvCache {
 public:
  // Errors: unsupported dtype, or more memory than size_t can index.
  static Result<KvCache> create(const std::vector<LayerShape>& layers, uint32_t n_ctx, uint32_t margin,
                                GgmlType dtype);

  uint32_t n_ctx() const { return n_ctx_; }
  uint32_t n_tokens() const { return n_tokens_; }  // positions [0, n_tokens) are valid
  GgmlType dtype() const { return dtype_; }
  uint64_t bytes() const;

  // Stores K and V (width floats each) of position pos in layer il. pos < n_ctx (asserted).
  void write(uint32_t il, uint32_t pos, const float* k, const float* v);
  // Marks positions [0, n) as valid; positions >= n are forgotten (speculative rollback).
  void set_n_tokens(uint32_t n);
  kernels::cpu::KvStore view(uint32_t il) const;

 private:
  struct Layer {
    LayerShape shape;
    uint32_t capacity = 0;
    std::vector<uint8_t> k, v;
  };
  std::vector<Layer> layers_;
  uint32_t n_ctx_ = 0;
  uint32_t n_tokens_ = 0;
  GgmlType dtype_ = GgmlType::F32;
};

}  // namespace strata::kv
