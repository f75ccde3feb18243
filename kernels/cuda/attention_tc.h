// The tensor-core prefill attention (attention_tc.cu), internal to kernels/cuda: attention.cu's
// attention() hands chunks of at least kTcMinQueries queries (f16 or f32 KV) to it.
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
  const void* k;         // KV store (f16 or f32), `capacity` slots of n_head_kv * head_dim
  const void* v;
  float* out;            // (n_q, n_head, head_dim)
  int64_t n_q, n_head, n_head_kv, capacity, window;
  int group;
  float scale;
};

// K and V both f16 or both f32 (quantised KV keeps the f32 kernel, which decodes its blocks).
bool attention_tc_applies(int64_t n_q, int64_t head_dim, GgmlType k, GgmlType v);
Status attention_tc(const TcAttnParams& p, int64_t head_dim, bool kv_f16, cudaStream_t st);

}  // namespace strata::kernels::cuda
