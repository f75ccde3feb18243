// Flash-decoding attention for 1..kDecodeMaxQueries queries, internal to kernels/cuda:
// attention.cu's attention() (and attention_tree()) hand such calls to it when it applies (f16 /
// Q8_0 / Q4_1 KV, head_dim 32, 64, 128 or 256).
//
// Contract beyond kernels/cpu/attention.h's semantics: a row (query, head) of a k-query call is
// bit-identical to the same query run alone, because the keys a row's arithmetic visits, their
// order and their split into chunks depend only on that row's own position, the window and the
// store's capacity (never on n_q or the other rows). The one exception: a workspace too small
// for the split count (decode_attention_workspace_bytes), or not 16-byte aligned, makes the call
// run unsplit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/ggml_type.h"
#include "core/status.h"
#include "kernels/cuda/act_round.h"
#include "kernels/cuda/attention_tree.h"
#include "kernels/cuda/cuda_api.h"

namespace strata::kernels::cuda {

inline constexpr int64_t kDecodeMaxQueries = 64;

// Split size for a row that sees n keys: the smallest power-of-two multiple of the smallest chunk
// (decode_min_chunk_keys) that splits n into at most 32 chunks. Chunk z of the row covers absolute
// positions [(floor(lo / C) + z) C, (floor(lo / C) + z + 1) C) intersected with its visible keys [lo, pos].
// 64 keys (2 tiles at head_dim 128) rather than 256: at short context a block walked its chunk's
// tiles one after another (~2 us of issue-bound work per tile), and at ~600 keys only 3 chunks per
// KV head were busy (48 blocks on 132 SMs); the decode attention was 1.22 of a 7.57 ms step
// (ablation, README). Measured (H100, 27B Q3_K_M resident, bench decode -c 4096 -p 512 -n 64,
// alternated twice in one call): min chunk 256 131.5 / 131.3 tok/s, 32 134.3 / 134.3; with 64 (and
// two GEMV experiments that measured neutral) 135.8 / 136.0 against 134.6 / 134.8 with 32. From
// 8K keys on the 32-split cap sets the chunk, so long contexts are unchanged.
inline constexpr int64_t kDecodeMinChunk = 64;
inline constexpr int64_t kDecodeTargetSplits = 32;
#ifdef __CUDACC__
#define STRATA_DECODE_HD __host__ __device__
#else
#define STRATA_DECODE_HD
#endif
STRATA_DECODE_HD inline int64_t decode_chunk_keys(int64_t n, int64_t min_chunk) {
  int64_t c = min_chunk;
  while ((n + c - 1) / c > kDecodeTargetSplits) c *= 2;
  return c;
}

// The smallest chunk for a head size: kDecodeMinChunk, or STRATA_ATTN_MIN_CHUNK (a power of two,
// read once per process; a tuning knob for benchmarks), never less than one tile (4096 / head_dim
// keys). Fixed per process, so a row's chunks still depend only on its own position.
int64_t decode_min_chunk_keys(int64_t head_dim);

// Split counters (attention_decode.cu, "last block done"): one per (row tile, KV head) block
// column of a split call, kAttentionCounterBytes (cuda_api.h) at the end of the workspace. They are
// zero before a workspace's first call (attention_workspace_clear) and every call leaves them zero.
// Their place depends only on ws, never on the call's shape, so calls of any shape (and the tiled
// kernel, whose partials also stop short of them) share one workspace.
inline constexpr int64_t kDecodeMaxCounters = int64_t(kAttentionCounterBytes / sizeof(unsigned));
// Bytes of ws before the counters, for partial results (0: no room for the counters).
size_t attention_partial_bytes(Workspace ws);
unsigned* attention_counters(Workspace ws);  // null where ws has no room for them

bool decode_attention_applies(int64_t n_q, int64_t head_dim, GgmlType k, GgmlType v);
// Partial results (not the counters) of calls of up to n_q queries over stores of up to max_keys slots.
size_t decode_attention_workspace_bytes(int64_t n_q, const AttentionShapeDev& s, int64_t max_keys);
// Whether a call of n_q queries runs split (the workspace holds the splits its store needs).
bool decode_attention_split_fits(int64_t n_q, const KvStoreDev& kv, const AttentionShapeDev& s, Workspace ws);
// Inputs validated by attention().
// path: optional (attention_tree.h TreePathDev, n_q == 1); it changes only where keys are read.
// tree: optional (attention_tree.h); it only removes keys, so a row alone with its own
// mask word still equals its row of the call. round: optional (act_round.h); where the call runs
// split, the merging blocks also round out into it and set *rounded (else *rounded = false).
// One launch per call; calls on one workspace must be on one stream (they share its counters).
Status decode_attention(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                        const AttentionShapeDev& s, float* d_out, Workspace ws, cudaStream_t st,
                        const TreeMaskDev* tree = nullptr, const ActRounding* round = nullptr,
                        bool* rounded = nullptr, const TreePathDev* path = nullptr);

}  // namespace strata::kernels::cuda
