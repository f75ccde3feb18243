// attention_head.h's AVX-512 head kernel. Compiled with -ffp-contract=off: GCC may fuse the
// intrinsics' vector multiply and add into an FMA otherwise, and attend_one rounds both.
#include <immintrin.h>

// GCC 12 warns inside _mm512_reduce_add_ps (its _mm512_extractf64x4_pd takes an undefined vector
// as the masked-off source): a false positive of the header, not of this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention_head.h"
#include "kernels/cpu/dot_float_avx512.h"
#include "kernels/cpu/dot_legacy_avx512.h"

namespace strata::kernels::cpu {
namespace {

// q.k: dot_f32_avx512's arithmetic (dot_float_avx512.h), its bits.
inline float dot_f32(const float* row, const float* x, int64_t n) { return dot_float_row(row, x, n, load16_f32); }

// out[c .. c + 16 * N) = sum over keys in order of p_j * v_j, from +0, in N registers.
template <int N>
void weighted_sum(const KvSlices& v, int64_t capacity, int64_t kv_head, const KeySpan& span, const float* p,
                  float inv, int64_t c, float* out) {
  __m512 acc[N];
  for (int r = 0; r < N; ++r) acc[r] = _mm512_setzero_ps();
  SpanPrefetch ahead(span, v, capacity, kv_head);
  for (int64_t j = 0, slot = span.first_slot(capacity); j < span.n; ++j) {
    if (c == 0) ahead.step(j);  // the first stripe's pass fetches for all
    const float* row = reinterpret_cast<const float*>(v.at(slot, kv_head)) + c;
    const __m512 pj = _mm512_set1_ps(p[j] * inv);
    for (int r = 0; r < N; ++r) acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(pj, _mm512_loadu_ps(row + 16 * r)));
    slot = span.next_slot(j, slot, capacity);
  }
  for (int r = 0; r < N; ++r) _mm512_storeu_ps(out + c + 16 * r, acc[r]);
}

// Scaled q.k of the span's keys into scores; their max. HD: head_dim where the compiler
// should see it (a common size: the dot's loops unrolled), else 0 and k.head_dim.
template <int64_t HD>
float key_scores(const float* q, const KvSlices& k, int64_t capacity, int64_t kv_head, const KeySpan& span,
                 float scale, const TreeRow& tree, float* scores) {
  const int64_t hd = HD ? HD : k.head_dim;
  float max_score = -INFINITY;
  SpanPrefetch ahead(span, k, capacity, kv_head);
  for (int64_t j = 0, slot = span.first_slot(capacity); j < span.n; ++j) {
    ahead.step(j);
    scores[j] = tree.sees(span.key(j))
                    ? dot_f32(reinterpret_cast<const float*>(k.at(slot, kv_head)), q, hd) * scale
                    : -INFINITY;
    max_score = std::max(max_score, scores[j]);
    slot = span.next_slot(j, slot, capacity);
  }
  return max_score;
}

// The hull of the rows' spans: keys [lo, hi].
struct Hull {
  int64_t lo, hi;
  static Hull of(const HeadRow* rows, int n) {
    Hull h{INT64_MAX, -1};
    for (int r = 0; r < n; ++r) {
      h.lo = std::min(h.lo, rows[r].span.lo);
      h.hi = std::max(h.hi, rows[r].span.lo + rows[r].span.n - 1);
    }
    return h;
  }
};

// 16 values of a slice as f32: f32 as they are, f16 widened (exact) as dot_f16_avx512 widens them.
template <bool kF16>
inline __m512 load16_kv(const void* r, int64_t i, __mmask16 m) {
  if constexpr (kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(r) + i));
  } else {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(r) + i);
  }
}

// key_scores for each row: the hull's keys in order, each K slice read once, dotted with the q of
// every row that sees it (a row's visible index is key - its lo), maxs per row. The q.k is the
// per-row path's: dot_f32_avx512's / dot_f16_avx512's arithmetic inlined (kKind 0 / 1), the
// q8_0 / q4_1 kernels' on the slice decoded once for all rows (3 / 4: LegacyRow), or the type's
// own dot kernel called per row on the slice (2: kinds RowsKv::kOther, the slice in L1).
template <int64_t HD, int kKind>
void rows_key_scores(const HeadRow* rows, int n, const KvSlices& k, DotFn k_dot, int64_t capacity, int64_t kv_head,
                     float scale, const Hull& h, float* maxs) {
  const int64_t hd = HD ? HD : k.head_dim;
  for (int r = 0; r < n; ++r) maxs[r] = -INFINITY;
  const KeySpan hull{0, h.lo, h.hi - h.lo + 1};
  SpanPrefetch ahead(hull, k, capacity, kv_head);
  for (int64_t key = h.lo, slot = h.lo % capacity; key <= h.hi; ++key) {
    ahead.step(key - h.lo);
    const uint8_t* kr = k.at(slot, kv_head);
    [[maybe_unused]] LegacyRow<kKind == 4, HD ? HD / kQK : kHeadAvx512MaxDim / kQK> legacy;
    if constexpr (kKind >= 3) legacy.decode(kr, int(hd / kQK));
    for (int r = 0; r < n; ++r) {
      const HeadRow& row = rows[r];
      const int64_t j = key - row.span.lo;
      if (j < 0 || j >= row.span.n) continue;
      float d = -INFINITY;
      if (row.tree.sees(key)) {
        if constexpr (kKind >= 3) {
          d = legacy.dot(row.q) * scale;
        } else if constexpr (kKind == 2) {
          d = k_dot(kr, row.q, hd) * scale;
        } else {
          d = dot_float_row(kr, row.q, hd, load16_kv<kKind == 1>) * scale;
        }
      }
      row.scores[j] = d;
      maxs[r] = std::max(maxs[r], d);
    }
    slot = slot + 1 == capacity ? 0 : slot + 1;
  }
}

// weighted_sum<N> for R rows over keys [k0, k1] of their hull, continuing the sums in out (the
// first tile finds them zero, i.e. +0 as weighted_sum starts): each V stripe loaded once per key,
// R x N accumulators in registers.
template <int N, int R, bool kF16>
void rows_weighted_sum(const HeadRow* rows, const KvSlices& v, int64_t capacity, int64_t kv_head, const float* inv,
                       int64_t k0, int64_t k1, int64_t slot0, int64_t c) {
  __m512 acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < N; ++i) acc[r][i] = _mm512_loadu_ps(rows[r].out + c + 16 * i);
  for (int64_t key = k0, slot = slot0; key <= k1; ++key) {
    const uint8_t* vr = v.at(slot, kv_head);
    __m512 x[N];
    for (int i = 0; i < N; ++i) x[i] = load16_kv<kF16>(vr, c + 16 * i, 0xffff);
    for (int r = 0; r < R; ++r) {
      const int64_t j = key - rows[r].span.lo;
      if (j < 0 || j >= rows[r].span.n) continue;
      const __m512 pj = _mm512_set1_ps(rows[r].scores[j] * inv[r]);
      for (int i = 0; i < N; ++i) acc[r][i] = _mm512_add_ps(acc[r][i], _mm512_mul_ps(pj, x[i]));
    }
    slot = slot + 1 == capacity ? 0 : slot + 1;
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < N; ++i) _mm512_storeu_ps(rows[r].out + c + 16 * i, acc[r][i]);
}

template <int N, bool kF16>
void rows_weighted_sum_n(const HeadRow* rows, int n, const KvSlices& v, int64_t capacity, int64_t kv_head,
                         const float* inv, int64_t k0, int64_t k1, int64_t slot0, int64_t c) {
  switch (n) {
    case 1: return rows_weighted_sum<N, 1, kF16>(rows, v, capacity, kv_head, inv, k0, k1, slot0, c);
    case 2: return rows_weighted_sum<N, 2, kF16>(rows, v, capacity, kv_head, inv, k0, k1, slot0, c);
    case 3: return rows_weighted_sum<N, 3, kF16>(rows, v, capacity, kv_head, inv, k0, k1, slot0, c);
    default: return rows_weighted_sum<N, 4, kF16>(rows, v, capacity, kv_head, inv, k0, k1, slot0, c);
  }
}

// out of every row: the hull in tiles of kRowsValueTile keys, and within a tile every group of four
// rows and every stripe of their dimensions, so that a tile's V slices are read from memory once
// (the later stripes and row groups find them in L2) and each row's sums still run over its keys in
// order. The rows' out holds their sums between tiles. V of another type (kKind 2) is decoded a
// tile at a time into v_tile by the type's exact decode, the values the per-row path decodes.
template <int kKind>
void rows_values(const HeadRow* rows, int n, const KvSlices& v, DequantizeFn v_decode, float* v_tile, int64_t capacity,
                 int64_t kv_head, const float* inv, const Hull& h) {
  const int64_t hd = v.head_dim;
  const KvSlices tile(v_tile, GgmlType::F32, hd, hd);  // key k0 + i at "slot" i
  for (int r = 0; r < n; ++r) std::fill(rows[r].out, rows[r].out + hd, 0.0f);
  for (int64_t k0 = h.lo; k0 <= h.hi; k0 += kRowsValueTile) {
    const int64_t k1 = std::min(h.hi, k0 + kRowsValueTile - 1);
    if constexpr (kKind == 2) {
      const KeySpan rest{0, k0, h.hi - k0 + 1};  // the hull from this tile on
      SpanPrefetch ahead(rest, v, capacity, kv_head);
      for (int64_t key = k0, slot = k0 % capacity; key <= k1; ++key) {
        ahead.step(key - k0);
        v_decode(v.at(slot, kv_head), v_tile + (key - k0) * hd, hd);
        slot = slot + 1 == capacity ? 0 : slot + 1;
      }
    } else {
      // f32 / f16 V is read in place: its slices of this tile are fetched here, ahead of the
      // first stripe's pass (the later stripes and row groups find them in L2).
      for (int64_t key = k0, slot = k0 % capacity; key <= k1; ++key) {
        v.prefetch(slot, kv_head);
        slot = slot + 1 == capacity ? 0 : slot + 1;
      }
    }
    const KvSlices& src = kKind == 2 ? tile : v;
    const int64_t src_cap = kKind == 2 ? kRowsValueTile : capacity, head = kKind == 2 ? 0 : kv_head;
    const int64_t slot0 = kKind == 2 ? 0 : k0 % capacity;
    for (int r0 = 0; r0 < n; r0 += 4) {
      const int m = std::min(4, n - r0);
      int64_t c = 0;
      for (; c + 64 <= hd; c += 64)
        rows_weighted_sum_n<4, kKind == 1>(rows + r0, m, src, src_cap, head, inv + r0, k0, k1, slot0, c);
      for (; c < hd; c += 16)
        rows_weighted_sum_n<1, kKind == 1>(rows + r0, m, src, src_cap, head, inv + r0, k0, k1, slot0, c);
    }
  }
}

template <int kK, int kV>
void attend_rows(const HeadRow* rows, int n_rows, const KvSlices& k, const KvSlices& v, const RowsKv& how,
                 float* v_tile, int64_t capacity, int64_t kv_head, float scale) {
  const int64_t hd = k.head_dim;
  const Hull h = Hull::of(rows, n_rows);
  float maxs[kHeadRowsMax], inv[kHeadRowsMax];
  if (hd == 64) {
    rows_key_scores<64, kK>(rows, n_rows, k, how.k_dot, capacity, kv_head, scale, h, maxs);
  } else if (hd == 128) {
    rows_key_scores<128, kK>(rows, n_rows, k, how.k_dot, capacity, kv_head, scale, h, maxs);
  } else {
    rows_key_scores<0, kK>(rows, n_rows, k, how.k_dot, capacity, kv_head, scale, h, maxs);
  }
  for (int r = 0; r < n_rows; ++r) inv[r] = exp_weights(rows[r].scores, rows[r].span.n, maxs[r]);
  rows_values<kV>(rows, n_rows, v, how.v_decode, v_tile, capacity, kv_head, inv, h);
}

template <int kK>
void attend_rows_v(const HeadRow* rows, int n_rows, const KvSlices& k, const KvSlices& v, const RowsKv& how,
                   float* v_tile, int64_t capacity, int64_t kv_head, float scale) {
  switch (how.v) {
    case RowsKv::kF32: return attend_rows<kK, 0>(rows, n_rows, k, v, how, v_tile, capacity, kv_head, scale);
    case RowsKv::kF16: return attend_rows<kK, 1>(rows, n_rows, k, v, how, v_tile, capacity, kv_head, scale);
    default: return attend_rows<kK, 2>(rows, n_rows, k, v, how, v_tile, capacity, kv_head, scale);
  }
}

}  // namespace

void attend_rows_avx512(const HeadRow* rows, int n_rows, const KvSlices& k, const KvSlices& v, const RowsKv& how,
                        float* v_tile, int64_t capacity, int64_t kv_head, float scale) {
  switch (how.k) {
    case RowsKv::kF32: return attend_rows_v<0>(rows, n_rows, k, v, how, v_tile, capacity, kv_head, scale);
    case RowsKv::kF16: return attend_rows_v<1>(rows, n_rows, k, v, how, v_tile, capacity, kv_head, scale);
    case RowsKv::kQ8_0: return attend_rows_v<3>(rows, n_rows, k, v, how, v_tile, capacity, kv_head, scale);
    case RowsKv::kQ4_1: return attend_rows_v<4>(rows, n_rows, k, v, how, v_tile, capacity, kv_head, scale);
    default: return attend_rows_v<2>(rows, n_rows, k, v, how, v_tile, capacity, kv_head, scale);
  }
}

void attend_head_f32_avx512(const float* q, const KvSlices& k, const KvSlices& v, int64_t capacity, int64_t kv_head,
                            const KeySpan& span, float scale, const TreeRow& tree, float* scores, float* out) {
  const int64_t hd = k.head_dim;
  const float max_score = hd == 64    ? key_scores<64>(q, k, capacity, kv_head, span, scale, tree, scores)
                          : hd == 128 ? key_scores<128>(q, k, capacity, kv_head, span, scale, tree, scores)
                                      : key_scores<0>(q, k, capacity, kv_head, span, scale, tree, scores);
  const float inv = exp_weights(scores, span.n, max_score);
  // 64 dims (4 registers) at a time, then what is left in 16s.
  int64_t c = 0;
  for (; c + 64 <= hd; c += 64) weighted_sum<4>(v, capacity, kv_head, span, scores, inv, c, out);
  for (; c < hd; c += 16) weighted_sum<1>(v, capacity, kv_head, span, scores, inv, c, out);
}

}  // namespace strata::kernels::cpu
