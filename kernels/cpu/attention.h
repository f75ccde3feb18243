// Causal (optionally sliding-window) multi-head attention with grouped KV heads, on the CPU.
//
// K and V live in per-layer stores of `capacity` slots; the entry for position p is in slot
// p % capacity (a ring for sliding-window layers, capacity >= max position + 1 otherwise). Each
// slot holds n_head_kv * head_dim values, f32 or f16.
// Query i (at position pos[i]) attends keys j with j <= pos[i] and, when window > 0,
// j > pos[i] - window; all those entries must be present in the store (the caller's contract).
#pragma once

#include <cstdint>

#include "core/ggml_type.h"

namespace strata::kernels::cpu {

struct KvStore {
  const void* k = nullptr;
  const void* v = nullptr;
  GgmlType dtype = GgmlType::F32;  // F32 or F16
  int64_t capacity = 0;            // slots
};

struct AttentionShape {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t window = 0;  // 0: full causal
  float scale = 1.0f;  // applied to q.k
};

// q: (n_q, n_head, head_dim); out: (n_q, n_head, head_dim); pos: n_q positions.
void attention(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
               float* out);

}  // namespace strata::kernels::cpu
