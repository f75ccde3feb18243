// Prefill attention on the CPU by tiles (flash-attention style): a tile of queries of one head
// against tiles of keys, scores and outputs by SGEMM, softmax kept online (running max and sum
// per query, the partial output rescaled when the max grows), so memory stays two key tiles per
// worker whatever the context. No attention sinks (AttentionShape::sinks; asserted). Same contract, layouts and result as attention() (attention.h) up
// to f32 rounding: the sums run in another order, so a row is NOT bit-identical to its
// one-query attention(). Used for prefill chunks (runtime/cpu_forward.cpp), never where rows must
// equal a one-token eval (speculative verify, batched decode).
#pragma once

#include <cstdint>

#include "kernels/cpu/attention.h"

namespace strata::kernels::cpu {

// Queries per chunk from which attention_tiled is worth its tile set-up.
inline constexpr int64_t kTiledAttentionMinQueries = 16;

// q: (n_q, n_head, head_dim); out: (n_q, n_head, head_dim); pos: n_q positions.
void attention_tiled(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
                     float* out);

}  // namespace strata::kernels::cpu
