// The tensor-core prefill attention (attention_tc.cu), internal to kernels/cuda: attention.cu's
// attention() hands chunks of at least kTcMinQueries queries to it, over f16 / q8_0 / q4_1 KV (K and
// V types chosen independently) or f32 K and V.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/ggml_type.h"
#include "core/status.h"

namespace strata::kernels::cuda {

// Below this many queries an f32 kernel runs: decode and speculative verification (up to 64
// tokens, attention_decode.h) keep its precision, and small chunks would leave most of a 64-row
// tile empty anyway.
inline constexpr int64_t kTcMinQueries = 65;

struct TcAttnParams {
  const float* q;        // (n_q, n_head, head_dim)
  const int32_t* pos;    // n_q positions
  const uint8_t* k;      // KV store: `capacity` slots of n_head_kv * head_dim values in k_type / v_type
  const uint8_t* v;
  int64_t k_row_bytes, v_row_bytes;    // bytes per slot
  int64_t k_head_bytes, v_head_bytes;  // bytes of one head's slice of a slot
  float* out;            // (n_q, n_head, head_dim)
  int64_t n_q, n_head, n_head_kv, capacity, window;
  int group;
  float scale;
};

// head_dim 64 or 128, and K, V each f16, q8_0 or q4_1, or both f32.
bool attention_tc_applies(int64_t n_q, int64_t head_dim, GgmlType k, GgmlType v);
Status attention_tc(const TcAttnParams& p, int64_t head_dim, GgmlType k, GgmlType v, cudaStream_t st);

}  // namespace strata::kernels::cuda
