// Attention with a token-tree visibility mask (M12's verification of a drafted tree) on the GPU:
// cuda_api.h's attention() with kernels/cpu/attention_tree.h's semantics. Flash-decoding only
// (attention_decode.h: n_q <= 64, f16 / q8_0 / q4_1 KV, 16-byte aligned q); a row run alone with
// its own mask word equals its row of the call, bit for bit, as without a mask.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_api.h"

namespace strata::kernels::cuda {

struct TreeMaskDev {
  const uint64_t* d_bits = nullptr;  // n_q words on the device
  int32_t first = 0;                 // position of the call's first new token
};

// A null tree.d_bits: attention() itself. Otherwise an error where flash-decoding does not apply.
Status attention_tree(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                      const AttentionShapeDev& s, const TreeMaskDev& tree, float* d_out, Workspace ws, Stream s_);

}  // namespace strata::kernels::cuda
