// Where one head's slice of a KV slot is, in a store of any type (attention.h's layout): slot s is
// one row of n_head_kv * head_dim values of the type, and head h's slice starts h * head_dim values
// in (whole blocks for the block types: head_dim % 32 == 0). Shared by the per-query and the tiled
// CPU attention.
#pragma once

#include <cstdint>

#include "core/ggml_type.h"

namespace strata::kernels::cpu {

struct KvSlices {
  const uint8_t* base;
  int64_t slot_bytes, head_bytes, head_dim;
  KvSlices(const void* p, GgmlType t, int64_t width, int64_t hd)
      : base(static_cast<const uint8_t*>(p)),
        slot_bytes(int64_t(ggml_row_bytes(t, uint64_t(width)))),
        head_bytes(int64_t(ggml_row_bytes(t, uint64_t(hd)))),
        head_dim(hd) {}
  const uint8_t* at(int64_t slot, int64_t kv_head) const { return base + slot * slot_bytes + kv_head * head_bytes; }
};

}  // namespace strata::kernels::cpu
