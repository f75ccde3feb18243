// QK-norm, RoPE and the KV-cache write of one layer's rows in one launch (qk_norm_rope.cu): the
// results of qk_norm_rope (cuda_api.h) followed by kv_write, bit for bit, for single-sequence
// rows written at positions d_pos (slot pos % capacity).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_api.h"

namespace strata::kernels::cuda {

// Whether qk_norm_rope_kv handles a cache of these dtypes (f16, f32; Q8_0 / Q4_1 where head_dim is
// a multiple of 32).
bool qk_norm_rope_kv_applies(const KvStoreDev& kv, int64_t head_dim);

// qk_norm_rope(d_q, d_k, d_pos, n_tok, p) and kv_write(d_k, d_v, d_pos, n_tok, n_head_kv * head_dim, kv).
Status qk_norm_rope_kv(float* d_q, float* d_k, const float* d_v, const int32_t* d_pos, int64_t n_tok,
                       const QkRopeDev& p, const KvStoreDev& kv, Stream s);

}  // namespace strata::kernels::cuda
