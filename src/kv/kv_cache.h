// Per-layer K/V storage for one sequence (CPU). Sliding-window layers keep a ring of
// `window + margin` slots, full-attention layers `n_ctx` slots (core/kv_ring.h); the entry for
// position p lives in slot p % capacity. Storage only: which positions are valid, how far a call
// may write ahead and how far a rollback may go are the sequence table's (kv/sequence_table.h),
// which the engine keeps beside its caches; a rollback touches no stored byte.
//
// Element types, chosen separately for K and V (kv/kv_quant.h has the codecs):
//   F32, F16 — as computed (f16: round to nearest even).
//   Q8_0 ("q8") — ggml's block_q8_0: groups of 32 consecutive values of a row, one f16 scale d and
//     32 int8 codes in [-127, 127]; y = q * d; 34 bytes per 32 values. |y - x| <= d / 2.
//   Q4_1 ("q4") — ggml's block_q4_1: groups of 32, f16 scale d and f16 offset m, 4-bit codes;
//     y = q * d + m; 20 bytes per 32 values. |y - x| <= d / 2 with d ~ (max - min) / 15.
// Groups never straddle heads: quantised types need head_dim % 32 == 0 (create() says so).
// A token's K/V is quantised once, in write(); attention reads the blocks directly.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"
#include "kernels/cpu/attention.h"

namespace strata::kv {

struct LayerShape {
  uint32_t width = 0;     // n_head_kv * head_dim values per position, for K and for V
  uint32_t window = 0;    // 0: full attention
  uint32_t head_dim = 0;  // 0: same as width (one head); quantised types need head_dim % 32 == 0
};

class KvCache {
 public:
  // Errors: unsupported type, a head_dim the quantised type cannot group, or more memory than can
  // be allocated.
  static Result<KvCache> create(const std::vector<LayerShape>& layers, uint32_t n_ctx, uint32_t margin,
                                GgmlType k_type, GgmlType v_type);

  uint32_t n_ctx() const { return n_ctx_; }
  GgmlType k_type() const { return k_type_; }
  GgmlType v_type() const { return v_type_; }
  uint32_t n_layer() const { return uint32_t(layers_.size()); }
  uint32_t capacity(uint32_t il) const { return layers_.at(il).capacity; }  // slots
  uint64_t bytes() const;

  // Stores K and V (width floats each) of position pos in layer il, converted to the layer's
  // types. pos < n_ctx (asserted).
  void write(uint32_t il, uint32_t pos, const float* k, const float* v);
  kernels::cpu::KvStore view(uint32_t il) const;
  // Copies the stored K and V rows of position `from` to position `to` in layer il, bytes as
  // stored (a quantised row moves whole: no requantisation), slots by the ring rule. Token trees
  // keep their accepted path this way (Engine::keep_tree_path). Positions < n_ctx (asserted).
  void move_row(uint32_t il, uint32_t from, uint32_t to);

  // The stored bytes of position pos's K or V row in layer il (tests compare stores with these).
  const uint8_t* k_row(uint32_t il, uint32_t pos) const;
  const uint8_t* v_row(uint32_t il, uint32_t pos) const;
  size_t k_row_bytes(uint32_t il) const;
  size_t v_row_bytes(uint32_t il) const;

 private:
  struct Layer {
    LayerShape shape;
    uint32_t capacity = 0;
    std::vector<uint8_t> k, v;  // (capacity, row bytes)
  };
  std::vector<Layer> layers_;
  uint32_t n_ctx_ = 0;
  GgmlType k_type_ = GgmlType::F32, v_type_ = GgmlType::F32;
};

}  // namespace strata::kv
