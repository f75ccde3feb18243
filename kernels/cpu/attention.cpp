#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_tree.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/attention_head.h"
#include "kernels/cpu/kv_slices.h"
#include "kernels/cpu/q8_act.h"
#include "kernels/cpu/quant/type_kernels.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cpu/team_parts.h"

namespace strata::kernels::cpu {
namespace {

// Readers of one head's slice of a slot: K gives q.k, V adds p * v to out. Both take q.k from the
// type's SIMD dot kernel (a plain `s += q[d] * k[d]` loop is one serial FMA chain: the compiler may
// not reorder a float sum, and at long context those dots are most of the attention time). V: f32
// adds in place (vectorised); every other type (f16 with F16C, Q8_0, Q4_1: whole 32-value blocks per
// head, head_dim % 32 == 0, checked by the store) decodes the slice into a head_dim scratch row.
struct F32Reader {
  KvSlices slices;
  DotFn dot_fn;
  F32Reader(const void* p, GgmlType t, int64_t width, int64_t hd)
      : slices(p, t, width, hd), dot_fn(best_dot(GgmlType::F32)) {}
  float dot(int64_t slot, int64_t kv_head, const float* q) const {
    return dot_fn(slices.at(slot, kv_head), q, slices.head_dim);
  }
  void axpy(int64_t slot, int64_t kv_head, float p, float* out, float*) const {
    const auto* v = reinterpret_cast<const float*>(slices.at(slot, kv_head));
    for (int64_t d = 0; d < slices.head_dim; ++d) out[d] += p * v[d];
  }
};

struct DecodingReader {
  KvSlices slices;
  DotFn dot_fn;
  DequantizeFn decode;
  DecodingReader(const void* p, GgmlType t, int64_t width, int64_t hd)
      : slices(p, t, width, hd), dot_fn(best_dot(t)), decode(best_dequantize(t)) {}
  float dot(int64_t slot, int64_t kv_head, const float* q) const {
    return dot_fn(slices.at(slot, kv_head), q, slices.head_dim);
  }
  void axpy(int64_t slot, int64_t kv_head, float p, float* out, float* row) const {
    decode(slices.at(slot, kv_head), row, slices.head_dim);
    for (int64_t d = 0; d < slices.head_dim; ++d) out[d] += p * row[d];
  }
};

struct Scratch {
  std::vector<float> scores, row;
};

// STRATA_ATTN_ROWS=0 (or set_attention_rows(false)): the per-(query, head) path where the
// rows-at-once one would run (A/B, tests).
std::atomic<bool> g_rows_path{[] {
  const char* e = std::getenv("STRATA_ATTN_ROWS");
  return !(e && std::string(e) == "0");
}()};
bool rows_path_on() { return g_rows_path.load(std::memory_order_relaxed); }

// best_dot(F32) is dot_f32_avx512: the CPU (and the STRATA_CPU cap) allows the AVX-512 head kernels.
bool avx512_heads() {
  static const bool on = best_dot(GgmlType::F32) == &dot_f32_avx512;
  return on;
}

// F32 K and V whose q.k is dot_f32_avx512: attend_head_f32_avx512 computes the same bits faster.
bool head_avx512(const KvStore& kv, int64_t head_dim) {
  return avx512_heads() && kv.k_dtype == GgmlType::F32 && kv.v_dtype == GgmlType::F32 && head_dim % 16 == 0 &&
         head_dim <= kHeadAvx512MaxDim;
}

// The rows-at-once path runs on AVX-512 CPUs (its V sums are AVX-512 code), without sinks (their
// spans are not one range), for head sizes in 16s up to kHeadAvx512MaxDim; any KV types.
bool rows_ok(const AttentionShape& s) {
  return avx512_heads() && s.sinks == 0 && s.head_dim % 16 == 0 && s.head_dim <= kHeadAvx512MaxDim;
}
// How it reads K and V, so that each row gets the per-row path's bits: f32 / f16 inline, q8_0 /
// q4_1 K decoded once per key, where the per-row q.k is the AVX-512 kernel; else the type's own
// dot and decode.
RowsKv rows_kv(const KvStore& kv) {
  RowsKv how;
  const DotFn k_dot = best_dot(kv.k_dtype);
  how.k = kv.k_dtype == GgmlType::F32 && k_dot == &dot_f32_avx512     ? RowsKv::kF32
          : kv.k_dtype == GgmlType::F16 && k_dot == &dot_f16_avx512   ? RowsKv::kF16
          : kv.k_dtype == GgmlType::Q8_0 && k_dot == &dot_q8_0_avx512 ? RowsKv::kQ8_0
          : kv.k_dtype == GgmlType::Q4_1 && k_dot == &dot_q4_1_avx512 ? RowsKv::kQ4_1
                                                                      : RowsKv::kOther;
  how.k_dot = k_dot;
  how.v = kv.v_dtype == GgmlType::F32 ? RowsKv::kF32 : kv.v_dtype == GgmlType::F16 ? RowsKv::kF16 : RowsKv::kOther;
  how.v_decode = best_dequantize(kv.v_dtype);
  return how;
}

template <typename KR, typename VR>
void attend_one(const float* q, int32_t pos, const KR& K, const VR& V, int64_t capacity, int64_t kv_head,
                const AttentionShape& s, const TreeRow& tree, bool avx512, Scratch& scratch, float* out) {
  const int64_t hd = s.head_dim;
  const KeySpan span = KeySpan::of(pos, s);
  const int64_t n = span.n;
  auto& scores = scratch.scores;
  scores.resize(size_t(n));
  if constexpr (std::is_same_v<KR, F32Reader> && std::is_same_v<VR, F32Reader>) {
    if (avx512) return attend_head_f32_avx512(q, K.slices, V.slices, capacity, kv_head, span, s.scale, tree,
                                              scores.data(), out);
  }
  scratch.row.resize(size_t(hd));
  // Slots by a ring counter (KeySpan::next_slot), not key % capacity per key: a 64-bit division is
  // 40-90 cycles on Skylake/Cascade Lake cores, two per key were most of a short context's time there.
  const int64_t first_slot = span.first_slot(capacity);
  float max_score = -INFINITY;
  SpanPrefetch k_ahead(span, K.slices, capacity, kv_head), v_ahead(span, V.slices, capacity, kv_head);
  for (int64_t j = 0, slot = first_slot; j < n; ++j) {
    k_ahead.step(j);
    scores[j] = tree.sees(span.key(j)) ? K.dot(slot, kv_head, q) * s.scale : -INFINITY;
    max_score = std::max(max_score, scores[j]);
    slot = span.next_slot(j, slot, capacity);
  }
  const float inv = exp_weights(scores.data(), n, max_score);
  std::fill(out, out + hd, 0.0f);
  for (int64_t j = 0, slot = first_slot; j < n; ++j) {
    v_ahead.step(j);
    V.axpy(slot, kv_head, scores[j] * inv, out, scratch.row.data());
    slot = span.next_slot(j, slot, capacity);
  }
}

// A call's thread-team parts: its KV bytes (each key's slices read `readers` times: once per head
// per query, or once per KV head and block) cut into at most `items` parts (team_parts.h), a scratch
// per part in pool, and the int8 output's layout.
struct CallParts {
  int n_parts;
  Q8ActView q8;
};
CallParts call_parts(const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s, int64_t readers,
                     int64_t items, std::vector<Scratch>& pool, void* out_q8) {
  int64_t keys = 0;
  for (int64_t i = 0; i < n_q; ++i) keys += KeySpan::of(pos[i], s).n;
  const uint64_t slice_bytes = ggml_row_bytes(kv.k_dtype, uint64_t(s.head_dim)) + ggml_row_bytes(kv.v_dtype, uint64_t(s.head_dim));
  const int n_parts = part_count(uint64_t(keys) * uint64_t(readers) * slice_bytes, items);
  if (pool.size() < size_t(n_parts)) pool.resize(size_t(n_parts));
  return {n_parts, out_q8 ? q8_act_layout(s.n_head * s.head_dim, n_q, out_q8) : Q8ActView{}};
}

// The rows-at-once path (attend_rows_avx512): AVX-512, no sinks (rows_ok), any KV types (rows_kv).
// A part takes blocks of up to kHeadRowsMax rows of one KV head, the rows of a head in (query,
// head) order, so a block holds a GQA group's heads, or the same heads of consecutive queries.
// The block size changes which loads are shared, never a row's bits; it shrinks where blocks of
// kHeadRowsMax would leave fewer blocks than the team has threads (a plain step over few KV heads).
void attention_rows(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
                    float* out, const TreeMask* tree, void* out_q8) {
  thread_local std::vector<Scratch> caller_pool;  // per part, as attention_typed's
  std::vector<Scratch>& pool = caller_pool;
  const int64_t group = s.n_head / s.n_head_kv, width = s.n_head_kv * s.head_dim;
  const KvSlices K(kv.k, kv.k_dtype, width, s.head_dim), V(kv.v, kv.v_dtype, width, s.head_dim);
  const int64_t rows_per_kv = n_q * group;
  int block = kHeadRowsMax;
  while (block > 1 && s.n_head_kv * ((rows_per_kv + block - 1) / block) < team_threads()) block /= 2;
  const int64_t blocks_per_kv = (rows_per_kv + block - 1) / block, items = s.n_head_kv * blocks_per_kv;
  // Bytes as the parts read them: each block reads its hull's K and V once.
  const auto [n_parts, q8] = call_parts(pos, n_q, kv, s, s.n_head_kv, items, pool, out_q8);
  const RowsKv how = rows_kv(kv);
  for (int p = 0; p < n_parts; ++p) pool[size_t(p)].row.resize(size_t(kRowsValueTile * s.head_dim));
  const team_profile::Label label("attention rows");
  team_run(n_parts, [&](int p) {
    Scratch& scratch = pool[size_t(p)];
    for (int64_t item = items * p / n_parts; item < items * (p + 1) / n_parts; ++item) {
      const int64_t g = item / blocks_per_kv, r0 = item % blocks_per_kv * block;
      const int n = int(std::min<int64_t>(block, rows_per_kv - r0));
      auto query = [&](int r) { return (r0 + r) / group; };          // row r's query
      auto head = [&](int r) { return g * group + (r0 + r) % group; };  // and head
      HeadRow rows[kHeadRowsMax];
      size_t need = 0;
      for (int r = 0; r < n; ++r) need += size_t(KeySpan::of(pos[query(r)], s).n);
      scratch.scores.resize(need);
      size_t at = 0;
      for (int r = 0; r < n; ++r) {
        const int64_t i = query(r), off = (i * s.n_head + head(r)) * s.head_dim;
        HeadRow& hr = rows[r];
        hr.q = q + off;
        hr.span = KeySpan::of(pos[i], s);
        hr.tree = tree && tree->bits ? TreeRow{true, tree->bits[i], tree->first} : TreeRow{};
        hr.scores = scratch.scores.data() + at;
        hr.out = out + off;
        at += size_t(hr.span.n);
      }
      attend_rows_avx512(rows, n, K, V, how, scratch.row.data(), kv.capacity, g, s.scale);
      if (out_q8)
        for (int r = 0; r < n; ++r)
          quantize_q8_act_range(out, q8, int(query(r)), head(r) * s.head_dim, (head(r) + 1) * s.head_dim);
    }
  });
}

template <typename KR, typename VR>
void attention_typed(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
                     float* out, const TreeMask* tree, void* out_q8) {
  // One scratch per part, owned by the caller's thread and reused across calls (as gemv_q8.cpp's
  // activation scratch: no part may call team_run, so nothing resizes the pool under them). Not a
  // thread_local of the worker threads: ASan's leak check flagged their per-thread buffers.
  thread_local std::vector<Scratch> caller_pool;
  std::vector<Scratch>& pool = caller_pool;  // named in the parts: the caller's, not each thread's
  const int64_t group = s.n_head / s.n_head_kv, width = s.n_head_kv * s.head_dim;
  const KR K(kv.k, kv.k_dtype, width, s.head_dim);
  const VR V(kv.v, kv.v_dtype, width, s.head_dim);
  // (query, head) pairs in order, cut into equal runs for the thread team; the KV bytes they read
  // decide how many threads are worth waking (decode: every head reads pos + 1 keys).
  const int64_t items = n_q * s.n_head;
  const auto [n_parts, q8] = call_parts(pos, n_q, kv, s, s.n_head, items, pool, out_q8);
  const bool avx512 = head_avx512(kv, s.head_dim);
  const team_profile::Label label("attention");
  team_run(n_parts, [&](int p) {
    Scratch& scratch = pool[size_t(p)];
    for (int64_t idx = items * p / n_parts; idx < items * (p + 1) / n_parts; ++idx) {
      const int64_t i = idx / s.n_head, h = idx % s.n_head;
      const int64_t off = (i * s.n_head + h) * s.head_dim;
      const TreeRow tree_row = tree && tree->bits ? TreeRow{true, tree->bits[i], tree->first} : TreeRow{};
      attend_one(q + off, pos[i], K, V, kv.capacity, h / group, s, tree_row, avx512, scratch, out + off);
      if (out_q8) quantize_q8_act_range(out, q8, int(i), h * s.head_dim, (h + 1) * s.head_dim);
    }
  });
}

template <typename KR>
void attention_v(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
                 float* out, const TreeMask* tree, void* out_q8) {
  if (kv.v_dtype == GgmlType::F32) return attention_typed<KR, F32Reader>(q, pos, n_q, kv, s, out, tree, out_q8);
  return attention_typed<KR, DecodingReader>(q, pos, n_q, kv, s, out, tree, out_q8);
}

bool kv_type_ok(GgmlType t, int64_t head_dim) {
  if (t == GgmlType::F32 || t == GgmlType::F16) return true;
  return (t == GgmlType::Q8_0 || t == GgmlType::Q4_1) && head_dim % 32 == 0;
}

void attention_masked(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
                      float* out, const TreeMask* tree, void* out_q8) {
  STRATA_CHECK(kv_type_ok(kv.k_dtype, s.head_dim) && kv_type_ok(kv.v_dtype, s.head_dim),
               "attention: KV types {}/{} with head_dim {}", ggml_type_info(kv.k_dtype).name,
               ggml_type_info(kv.v_dtype).name, s.head_dim);
  STRATA_CHECK(!out_q8 || s.head_dim % kQ8Group == 0, "attention: int8 output with head_dim {}", s.head_dim);
  STRATA_CHECK(s.sinks >= 0 && (s.sinks == 0 || s.window > 0), "attention: {} sinks with window {}", s.sinks,
               s.window);
  // Sinks are the first positions' own entries: a ring that wrapped has overwritten them.
  for (int64_t i = 0; s.sinks > 0 && i < n_q; ++i)
    STRATA_CHECK(pos[i] < kv.capacity, "attention: sinks over a store of {} slots at position {} (a ring)",
                 kv.capacity, pos[i]);
  if (rows_ok(s) && rows_path_on()) return attention_rows(q, pos, n_q, kv, s, out, tree, out_q8);
  if (kv.k_dtype == GgmlType::F32) return attention_v<F32Reader>(q, pos, n_q, kv, s, out, tree, out_q8);
  return attention_v<DecodingReader>(q, pos, n_q, kv, s, out, tree, out_q8);
}

}  // namespace

void set_attention_rows(bool on) { g_rows_path.store(on, std::memory_order_relaxed); }

void attention(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
               float* out, void* out_q8) {
  attention_masked(q, pos, n_q, kv, s, out, nullptr, out_q8);
}

void attention_tree(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
                    const TreeMask& tree, float* out) {
  attention_masked(q, pos, n_q, kv, s, out, tree.bits ? &tree : nullptr, nullptr);
}

}  // namespace strata::kernels::cpu
