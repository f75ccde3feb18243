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
  // Asks for a slice's cache lines ahead of its use. Why: a head's slices are slot_bytes apart
  // (all heads of a slot in one row), one 136 .. 512-byte slice per key, and the hardware
  // prefetchers did not run ahead of that stride: the CPU attention over q8_0 KV read 1-2 GB/s.
  void prefetch(int64_t slot, int64_t kv_head) const {
    const char* p = reinterpret_cast<const char*>(at(slot, kv_head));
    for (int64_t o = 0; o < head_bytes; o += 64) __builtin_prefetch(p + o);
    __builtin_prefetch(p + head_bytes - 1);
  }
};
// Keys a CPU attention loop prefetches ahead of the one it reads (KvSlices::prefetch).
inline constexpr int64_t kKvPrefetchKeys = 16;

}  // namespace strata::kernels::cpu
