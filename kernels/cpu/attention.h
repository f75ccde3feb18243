// Causal (optionally sliding-window) multi-head attention with grouped KV heads, on the CPU.
//
// K and V live in per-layer stores of `capacity` slots; the entry for position p is in slot
// p % capacity (a ring for sliding-window layers, capacity >= max position + 1 otherwise). Each
// slot holds one row of n_head_kv * head_dim values: f32, f16, or ggml blocks of 32 values (Q8_0,
// Q4_1; head_dim % 32 == 0, so a head's slice is whole blocks). K and V types are independent.
// Quantised entries are decoded per key while attending (no dequantised copy of the store).
// Query i (at position pos[i]) attends keys j with j <= pos[i] and, when window > 0,
// j > pos[i] - window, plus, when sinks > 0 too, the attention sinks j < sinks (StreamingLLM: a
// drafter's window over a full-attention layer, runtime/draft_window.h). All those entries must be
// present in the store (the caller's contract): sinks need a store that never wraps (capacity >
// every query's position), checked. Keys are visited in increasing position whatever the
// visible set, so a row equals the plain computation over exactly its visible keys.
// The (query, head) pairs, or blocks of a KV head's rows (set_attention_rows below), are split over
// the CPU thread team (thread_team.h): callable from any thread, not from inside a team task.
#pragma once

#include <cstdint>

#include "core/ggml_type.h"

namespace strata::kernels::cpu {

struct KvStore {
  const void* k = nullptr;
  const void* v = nullptr;
  GgmlType k_dtype = GgmlType::F32;  // F32, F16, Q8_0 or Q4_1
  GgmlType v_dtype = GgmlType::F32;
  int64_t capacity = 0;            // slots
};

struct AttentionShape {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t window = 0;  // 0: full causal
  float scale = 1.0f;  // applied to q.k
  int64_t sinks = 0;   // with window > 0: keys [0, sinks) stay visible too; 0: none
};

// q: (n_q, n_head, head_dim); out: (n_q, n_head, head_dim); pos: n_q positions.
// out_q8: null, or q8_act_bytes(n_head * head_dim, n_q) bytes (64-byte aligned) that receive out
// quantised for an int8 matmul (the bits quantize_q8_act(out, ...) gives, q8_act.h), each head by
// the part that computed it: no serial quantisation pass before the output projection. Needs
// head_dim % 32 == 0 (asserted), so that a head is whole activation groups.
void attention(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
               float* out, void* out_q8 = nullptr);

// Where the CPU has AVX-512 (no sinks), the rows of a KV head are computed together, each key read
// (and decoded) once for all of them (attention_head.h attend_rows_avx512), with the bits of the
// per-(query, head) path, for every KV type. On by default; STRATA_ATTN_ROWS=0 or this turns it off
// (comparisons; process-wide, not while a call runs).
void set_attention_rows(bool on);

}  // namespace strata::kernels::cpu
