// One query head of CPU decode attention over f32 K and V slices (attention.cpp's per-query path),
// and the tree visibility of one query. Internal to kernels/cpu/attention*.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_slices.h"
#include "kernels/cpu/quant_kernels.h"

namespace strata::kernels::cpu {

// A query's tree visibility (TreeMask): all keys unless `on`.
struct TreeRow {
  bool on = false;
  uint64_t bits = 0;
  int64_t first = 0;
  bool sees(int64_t j) const {
    const int64_t d = j - first;
    return !on || d < 0 || (d < 64 && ((bits >> d) & 1u) != 0);
  }
};

// The keys a query at position pos sees (attention.h), in increasing position: the sinks
// [0, n_sink), then the recent run [lo, pos]. Without sinks n_sink = 0; where the run reaches
// the sinks (lo <= sinks) n_sink = lo: either way the keys are one contiguous range.
struct KeySpan {
  int64_t n_sink = 0, lo = 0, n = 0;  // n: visible keys in all
  static KeySpan of(int64_t pos, const AttentionShape& s) {
    const int64_t lo = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
    const int64_t n_sink = s.window > 0 ? std::min(s.sinks, lo) : 0;
    return {n_sink, lo, n_sink + pos - lo + 1};
  }
  int64_t key(int64_t j) const { return j < n_sink ? j : lo + (j - n_sink); }  // j-th visible key
  int64_t first_slot(int64_t capacity) const { return (n_sink > 0 ? 0 : lo) % capacity; }
  // The slot of visible key j + 1, given key j's: a ring counter (no division per key), which
  // jumps from the last sink to lo.
  int64_t next_slot(int64_t j, int64_t slot, int64_t capacity) const {
    if (j + 1 == n_sink) return lo % capacity;
    return slot + 1 == capacity ? 0 : slot + 1;
  }
};

// A loop over a span's keys in order fetching the slice kKvPrefetchKeys keys ahead of the one it
// reads (KvSlices::prefetch), by a second slot counter: call step(j) before reading key j.
struct SpanPrefetch {
  const KeySpan& span;
  const KvSlices& kv;
  int64_t capacity, kv_head, ahead;
  SpanPrefetch(const KeySpan& s, const KvSlices& slices, int64_t cap, int64_t head)
      : span(s), kv(slices), capacity(cap), kv_head(head),
        ahead(s.n > kKvPrefetchKeys ? s.key(kKvPrefetchKeys) % cap : 0) {}
  void step(int64_t j) {
    if (j + kKvPrefetchKeys >= span.n) return;
    kv.prefetch(ahead, kv_head);
    ahead = span.next_slot(j + kKvPrefetchKeys, ahead, capacity);
  }
};

// scores[j] := e^(scores[j] - max) for a row's n scores: fast_exp.h's exp_weight (within 2 ulp of
// expf; +0 below e^-87, so a masked key's -inf is 0; NaN stays NaN), in AVX2 lanes where the CPU
// has them (attention_exp*.cpp, the same bits either way).
void exp_shifted(float* scores, int64_t n, float max);
void exp_shifted_avx2(float* scores, int64_t n, float max);  // only where cpu_features().avx2

// exp_shifted, then 1 / the weights' sum (in double, key by key): the softmax weights every CPU
// decode path applies (p_j = scores[j] * the returned value), one definition so that the paths
// keep one another's bits.
inline float exp_weights(float* scores, int64_t n, float max) {
  exp_shifted(scores, n, max);
  double denom = 0;
  for (int64_t j = 0; j < n; ++j) denom += scores[j];
  return float(1.0 / denom);
}

// The AVX-512 path of attend_one for f32 K and V: the same operations in the same order (each
// q.k as dot_f32_avx512 sums it, scaled; the max; expf and the double denominator key by key; out
// as 0 + p * v for each key in order, a multiply then an add, never fused), so the same bits, with
// the K dot inlined and out held in registers across the keys instead of a load, add and store of
// it per key. The keys of `span`, in its order. Needs head_dim % 16 == 0 and
// head_dim <= kHeadAvx512MaxDim; scores: n floats of scratch. Call only where the CPU has AVX-512
// and best_dot(F32) is dot_f32_avx512 (attention.cpp checks both).
inline constexpr int64_t kHeadAvx512MaxDim = 256;
void attend_head_f32_avx512(const float* q, const KvSlices& k, const KvSlices& v, int64_t capacity, int64_t kv_head,
                            const KeySpan& span, float scale, const TreeRow& tree, float* scores, float* out);

// One row of attend_rows_avx512: a query head over its span (without sinks: keys [lo, lo + n)),
// with its tree visibility, its q, n floats of score scratch and its head_dim outputs.
struct HeadRow {
  const float* q = nullptr;
  KeySpan span;
  TreeRow tree;
  float* scores = nullptr;
  float* out = nullptr;
};
inline constexpr int kHeadRowsMax = 16;

// How the rows path reads a store's K and V: f32 and f16 by inline AVX-512 code where the per-row
// path's q.k is dot_f32_avx512 / dot_f16_avx512, K of q8_0 / q4_1 decoded once per key for all
// rows where it is dot_q8_0_avx512 / dot_q4_1_avx512 (dot_legacy_avx512.h LegacyRow, their bits),
// anything else through the type's kernels (k_dot: best_dot, the per-row path's q.k; v_decode:
// best_dequantize, the exact decode's values).
struct RowsKv {
  enum Kind : uint8_t { kF32, kF16, kOther, kQ8_0, kQ4_1 };  // kQ8_0, kQ4_1: K only
  Kind k = kF32, v = kF32;
  DotFn k_dot = nullptr;
  DequantizeFn v_decode = nullptr;
};
// V keys per tile of the rows path (rows_values): V of kOther kinds is decoded a tile at a time
// into the caller's v_tile of kRowsValueTile * head_dim floats.
inline constexpr int64_t kRowsValueTile = 256;

// attend_head_f32_avx512 for 1..kHeadRowsMax rows of one KV head at once (the query heads of a GQA
// group, of one or several queries), K and V of any store type: each key's K and V slices are read
// (and V decoded) once for all the rows that see it, instead of once per row. Why: a decode step's
// heads of one group, and a verify pass's queries, read the same keys; at long context those reads
// (L2/L3 or DRAM) were a large share of the CPU attention's time (27B-shaped heads, 32 / 16 x 128,
// f32 KV, 8K keys, 2 Zen 4 threads: one query 8.9-9.5 -> 5.9-6.2 ms, eight 59-62 -> 18.5-21 ms).
// Every row gets the per-row path's bits: the same q.k (RowsKv), V's values widened or decoded
// exactly, and per row the same operations in the same key order (the loop over rows moved inside
// the loop over keys; V in tiles of keys, four rows' accumulators of a 64-dimension stripe in
// registers, so a tile's V is read from memory once for all the rows). Call only on a CPU with
// AVX-512.
void attend_rows_avx512(const HeadRow* rows, int n_rows, const KvSlices& k, const KvSlices& v, const RowsKv& how,
                        float* v_tile, int64_t capacity, int64_t kv_head, float scale);

}  // namespace strata::kernels::cpu
