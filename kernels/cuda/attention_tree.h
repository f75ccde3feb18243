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

// Nodes of a token tree, each computed exactly as the decode step of its root-to-node path: node
// q's query sits at its path's position P (d_pos[q] = pos0 + depth) and key F + k, k < n (d_n[q] =
// depth + 1), F = P - n + 1 (= pos0), is read from slot F + d_slots[q * stride + k] (the node's
// ancestor at depth k, then the node itself), where the tree wrote it; every other key comes from
// its own slot. Keys, splits, tiles and lanes are then the chain step's, so each row equals that
// step bit for bit -- which a mask over the nodes' own slots (attention_tree) cannot promise on the
// GPU: a key's lane and chunk follow its slot. One call takes all the nodes of a step (each block
// holds one node's rows, as a call of its own would), where the workspace holds the splits of n_q
// queries as it does of one (else an error: call per node). Paths, lengths and positions are device
// inputs, so a CUDA graph of the step replays at any pos0 and for every tree of the same node count.
struct TreePathDev {
  const int32_t* d_slots = nullptr;  // per query, d_n[q] entries on the device: slot offsets from F
  const int32_t* d_n = nullptr;      // per query, its path's length, 1..kDecodeMaxQueries (not checked on the device)
  int32_t stride = 0;                // entries from one query's slots to the next's (n_q > 1)
};
// Errors: as attention(), where flash-decoding does not apply (attention_rows_exact false), and
// where the workspace holds the splits of one query but not of n_q.
Status attention_tree_path(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                           const AttentionShapeDev& s, const TreePathDev& path, float* d_out, Workspace ws, Stream s_);

}  // namespace strata::kernels::cuda
