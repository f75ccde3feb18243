// Flash-decoding attention (attention_decode.h): 1..64 queries over f16 / Q8_0 / Q4_1 KV, read in
// place (quantised blocks are decoded in registers from shared memory), with an optional token-tree
// mask (attention_tree.h). A tensor-core variant (Q.K in f16 mma, P.V in tf32 mma) was measured in
// the ninth session: 3% faster for q8, equal for q4, 33% slower for f16 (issue-bound at ~90 warp
// instructions per key and KV head); it lives on branch `attn` until it wins.
//
// Grid: (row tiles, n_head_kv, splits). For KV head g the rows are the (query, head) pairs whose
// head maps to g (row r = query r / group, head g * group + r % group); a block takes R <= 8
// consecutive rows, so all the query heads of a GQA group (and several queries) share each KV
// load. blockIdx.z picks chunk z of every row's keys (decode_chunk_keys: <= 32 chunks of a
// power-of-two multiple of 64 keys, aligned to absolute positions); the block walks the union of
// its rows' chunk-z ranges in tiles of TK = 4096 / head_dim keys.
//
// Loads: each key's head slice is copied raw (the 16-byte-aligned span around it) into a
// cp.async ring in shared memory (3 stages), 16-byte copies only; keys outside the rows' ranges are
// zero-filled, and so are bytes past the end of the store. Compute: a warp holds 32 / LK keys at
// once, LK = head_dim / 8 lanes per key, each lane 8 dimensions (q in registers); scores are an
// f32 dot over the lane's 8 dims (over the integer codes for q8/q4, the block's d and m applied
// once per key) and a transposed butterfly over the LK lanes, in log2 units (exp2). Each group of
// LK lanes keeps its own online softmax (running max m, sum l, f32 output acc) over its 4 keys of
// every tile, so the loop needs no block-wide reduction; at the end the block merges its groups in a fixed order
// and, unsplit, writes acc / l itself.
//
// Attention sinks (a drafter's window, kernels/cpu/attention.h): a row at pos sees [0, n_sink) and
// [lo, pos], n_sink = min(sinks, lo). Split, chunk z = 0 is the sinks (one more split than the
// window alone needs) and z >= 1 are the window's chunks as without sinks, so a row's chunks still
// depend only on its own position; unsplit (a workspace too small), the block walks [0, pos] and
// masks the keys between the runs (correct, not fast).
//
// Split (one launch, "last block done"): each block writes its chunk's (m, l, acc) to the
// workspace, fences, and counts itself in on its (row tile, KV head) column's counter; the block
// that arrives last (count == splits - 1) merges the column's chunks in order z = 0, 1, ... (w_z =
// 2^(m_z - M), out = sum_z w_z acc_z / sum_z w_z l_z), writes out (and, where asked, its int8
// rounding, act_round.h) and sets the counter back to 0. A separate combine launch used to do the
// merge (~4 us per layer of launch and dependency gap on an H100); the arithmetic is its, operation
// for operation, so the bits are too. The counters live at the end of the workspace
// (attention_decode.h kDecodeMaxCounters): zero before the first call, and every call leaves them zero.
//
// Determinism and batch exactness: no float atomics, every sum in a fixed order with explicitly
// rounded operations (no contraction choices left to the compiler), and a row's keys, tiles,
// chunks and lanes depend only on its own position, so a row of a k-query call equals the query
// run alone. Keys of a tile that a row does not see are skipped per row (no update at all).
//
// Measured (H200, bench kernels, 1 query, 16 KV heads x 128, GQA 2): f16 61% / 73% of device read
// at 32K / 128K keys, q8 35 / 43%, q4 24 / 29% (the tiled kernel: 14-15%, 5%, 4%; before branch
// attn2 cut the copy plan, q8 loads and q4 decode: 54 / 63, 29 / 33, 20 / 23). The
// limiter is instruction issue (SM ~65%, 4 blocks x 4 warps per SM by registers, ~5 cycles per
// issued instruction per warp), not DRAM: ~800 instructions per warp and tile of 32 keys for q8, of
// which the decode and FMAs are ~300, copies ~140, butterfly and softmax ~120. Per key the work is
// about the same for every format, so fewer bytes per key do not run proportionally faster.
// H100 (2026-12-07, bench kernels, 1 query, GQA 2): f16 78 / 91% of read at 32K / 128K keys, q8 50 /
// 57%, q4 32 / 38%. Short contexts have a floor: 10.4 us at 16 keys, 15-16 us at 256-1024 (a
// sliding layer's window), 22 us at 4096. ncu on a decode step of the 27B at ~10 keys (base
// clocks): 20.8 us, SMs active a third of it; stalls "no instruction" (the kernel is ~6400 SASS
// instructions, fetched cold by each block), barrier and membar (the last-block merge), so at a
// 4K context the 52 sliding layers' attention is ~12% of a resident decode step.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>

#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/attention_decode.h"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/kv_quant.cuh"
#include "kernels/cuda/matmul_internal.h"

namespace strata::kernels::cuda {
namespace {

constexpr int kThreads = 128, kWarps = kThreads / 32;
constexpr int kStages = 3;  // 48 KB of f16 tiles: four blocks per H200 SM, 512 blocks in one wave
constexpr int kKeysPerGroup = 4;  // keys of a tile per lane group (TK / groups, for every head_dim)
constexpr int kMaxUnits = 8;      // 16-byte copies per thread per tile, half K, half V (TK * units <= 512 each)

struct DecParams {
  const float* q;
  const int32_t* pos;
  const uint8_t* k;
  const uint8_t* v;
  const uint8_t* k_end;  // one past the store's last byte (copies past it are zero-filled)
  const uint8_t* v_end;
  int64_t k_row_bytes, v_row_bytes;    // bytes per slot
  int64_t k_head_bytes, v_head_bytes;  // bytes of one head's slice of a slot
  int k_fmt, v_fmt;                    // kvq::Fmt: kF16, kQ8 or kQ4
  int k_units, v_units;                // 16-byte units staged per key (the aligned span)
  float* out;
  float* part_acc;  // (splits, n_q * n_head, head_dim) when split
  float* part_ml;   // (splits, n_q * n_head, 2): m, l
  unsigned* counters;  // split: per (row tile, KV head) block column, blocks of it done; 0 between launches
  ActRounding round;   // split: out's int8 rounding (round.q null: none)
  int n_q, n_head, group, capacity, window;
  int sinks;  // with window > 0: keys [0, sinks) are seen too (attention_decode.cu's sinks note)
  int split;  // 0: one block per row tile covers all keys and writes out directly
  int sink_split;  // 1 where split with sinks: chunk z = 0 is the sinks, z >= 1 the window's chunks
  int inner_ok;  // a tile's slot offsets (key tile x row bytes) fit in 32 bits
  const uint64_t* tree_bits;  // per query, or null: no tree mask (attention_tree.h)
  int tree_first;
  // Tree paths (attention_tree.h TreePathDev; query q at position P_q): key F + k, k < path_n[q],
  // F = P_q - path_n[q] + 1, is read from slot F + path_slots[q * path_stride + k] instead of its
  // own. F comes from the query's device position, so a CUDA graph of a tree step replays at any
  // pos0. Each block then holds one query's rows (path_tiles blocks per query), so every query is
  // computed exactly as in a call of its own. Null: every key from its own slot.
  const int32_t* path_slots;
  const int32_t* path_n;  // on the device, per query
  int path_stride, path_tiles;
  int min_chunk;    // decode_min_chunk_keys(head_dim)
  float scale_log2;  // scale / ln 2: scores in log2 units (exp2 is one instruction)
};

template <int HD>
struct Geo {
  static constexpr int TK = 4096 / HD;        // keys per tile
  static constexpr int LK = HD / 8;           // lanes per key
  static constexpr int GPW = 32 / LK;         // lane groups per warp
  static constexpr int NG = kWarps * GPW;     // lane groups per block
  static_assert(TK == NG * kKeysPerGroup);
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// 2^x in one MUFU instruction (exp2f adds a denormal-range fix-up): results below 2^-126 become 0,
// weights that add nothing next to the running max's 1.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Exact small-integer to float without I2F (a quarter-rate instruction): byte e of x placed under
// the exponent of 2^23 (0x4B000000), minus 2^23 (+ 128 for offset bytes).
__device__ __forceinline__ float magic_byte(uint32_t x, int e) {
  return __int_as_float(int(__byte_perm(x, 0x4B000000u, 0x7540u + unsigned(e))));
}

// Dimensions 8c .. 8c + 7 of a key's head slice (b: its first byte in shared memory), as
// x * d + m: f16 values (d = 1, m = 0 unused), q8's exact integer codes with their block's scale
// d (m = 0), or q4's codes as 0.5 + n / 256 with d and m adjusted to match (below), so that the
// callers fold d and m in once per key instead of once per value (score = d * sum q x + m * sum q;
// acc += (p d) x, acc_m += p m).
//   f16: 16 bytes at 16c (b is 16-byte aligned: f16 slices always are).
//   q8:  block c / 4 (34 bytes: f16 d, 32 int8 codes), codes (c % 4) * 8 .. + 7 (2-byte aligned:
//        read as three aligned words and funnel-shifted).
//   q4:  block c / 4 (20 bytes: f16 d, f16 m, 16 code bytes; value i is the low nibble of byte i,
//        value 16 + i its high nibble): bytes (c & 1) * 8 .. + 7, nibble (c >> 1) & 1 (4-aligned).
// u0: the 16-byte unit the slice starts in, off: the slice's start within it (b = u0 + off). q8's
// aligned words are addressed from u0 with integer offsets (not through an integer cast of the
// pointer), so they stay shared-memory loads rather than generic ones.
__device__ __forceinline__ void codes8(int fmt, const uint8_t* u0, int off, int c, float (&x)[8], float& d, float& m) {
  const uint8_t* b = u0 + off;
  if (fmt == kvq::kF16) {
    const uint4 w = *reinterpret_cast<const uint4*>(b + c * 16);
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&ws[i]));
      x[2 * i] = f.x;
      x[2 * i + 1] = f.y;
    }
    d = 1.0f, m = 0.0f;
  } else if (fmt == kvq::kQ8) {
    const uint8_t* blk = b + (c >> 2) * kvq::kQ8Bytes;
    d = kvq::half_bits_to_float(*reinterpret_cast<const uint16_t*>(blk));
    m = 0.0f;
    const int codes = off + (c >> 2) * kvq::kQ8Bytes + 2 + (c & 3) * 8;  // from u0 (16-byte aligned)
    const uint32_t* w = reinterpret_cast<const uint32_t*>(u0 + (codes & ~3));
    const unsigned sh = unsigned(codes & 2) * 8u;
    const uint32_t w0 = w[0], w1 = w[1], w2 = w[2];
    const uint32_t lo = __funnelshift_r(w0, w1, sh) ^ 0x80808080u, hi = __funnelshift_r(w1, w2, sh) ^ 0x80808080u;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      x[e] = __fsub_rn(magic_byte(lo, e), 8388736.0f);
      x[4 + e] = __fsub_rn(magic_byte(hi, e), 8388736.0f);
    }
  } else {
    // Code n as the float 0.5 + n / 256 (one byte_perm: n under 0x3F000000, the top of the
    // mantissa), i.e. x = n + 128 in units of d / 256: value = (256 d) x' + (m - 128 d) with
    // x' = 0.5 + n / 256. The 128 d offset is folded into m (once per key) instead of a subtract
    // per value; it costs ~4 of f32's 24 bits on the sums (offset 128 vs codes 0..15).
    const uint8_t* blk = b + (c >> 2) * kvq::kQ4Bytes;
    const uint32_t dm = *reinterpret_cast<const uint32_t*>(blk);
    const float d16 = kvq::half_bits_to_float(dm), m16 = kvq::half_bits_to_float(dm >> 16);
    d = __fmul_rn(d16, 256.0f);
    m = __fmaf_rn(-128.0f, d16, m16);
    const uint32_t* w = reinterpret_cast<const uint32_t*>(blk + 4 + (c & 1) * 8);
    const unsigned shift = unsigned((c >> 1) & 1) * 4u;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint32_t nib = (w[i] >> shift) & 0x0F0F0F0Fu;
#pragma unroll
      for (int e = 0; e < 4; ++e) x[4 * i + e] = __int_as_float(int(__byte_perm(nib, 0x3F000000u, 0x7044u + (unsigned(e) << 8))));
    }
  }
}

// KF, VF: the K and V formats when fixed at compile time (the same-type pairs), else -1 (p's).
// One or two rows (decode): at most 128 registers, four blocks per SM.
// kLean: no tree mask, no tree paths, no sinks (a plain decode or verify step): those branches
// compiled out, so that a block fetches less code cold (the short-context floor, above). Measured
// (H100, bench kernels, 1 query): f16 15.8 -> 14.4 us at 256 keys, 16.6 -> 15.7 at 1024, 22.1 ->
// 21.1 at 4096; q4 15.2 -> 13.3, 15.8 -> 14.7; 27B Q3_K_M resident decode 135.1 -> 140.3 tok/s.
template <int HD, int R, int KF, int VF, bool kLean>
__global__ void __launch_bounds__(kThreads, R <= 2 ? 4 : 1) decode_attention_kernel(DecParams p) {
  using G = Geo<HD>;
  constexpr int TK = G::TK, LK = G::LK, GPW = G::GPW, NG = G::NG;
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int row_lo[R], row_hi[R];  // this split's key range per row (empty: lo > hi)
  __shared__ int row_live[R];           // a row of the call (not padding)
  __shared__ int row_sink[R];           // unsplit with sinks: the row also sees keys [0, row_sink)
  __shared__ uint64_t row_tree[R];      // tree mask word per row (tree_bits only)
  __shared__ uint8_t k_off[kStages][TK], v_off[kStages][TK];  // slice start within its first unit

  // The GEMV after this kernel may start loading its weights now: launched with PDL, it still
  // waits (griddepcontrol.wait) for this whole grid, the last blocks' merges included, to complete
  // before it reads out.
  detail::pdl_launch_dependents();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = blockIdx.y, z = blockIdx.z;
  const bool has_path = !kLean && p.path_slots != nullptr, has_tree = !kLean && p.tree_bits != nullptr;
  const int sinks = kLean ? 0 : p.sinks, sink_split = kLean ? 0 : p.sink_split;
  const int n_rows = p.n_q * p.group;
  // Tree paths: the block's query qi and its rows [row0, row_end) within that query's group.
  const int qi = has_path ? int(blockIdx.x) / p.path_tiles : 0;
  const int row0 = has_path ? qi * p.group + int(blockIdx.x) % p.path_tiles * R : int(blockIdx.x) * R;
  const int row_end = has_path ? (qi + 1) * p.group : n_rows;

  if (tid < R) {
    const int gr = row0 + tid;
    int lo = 0x7fffffff, hi = -1, live = 0, sink = 0;
    if (gr < row_end) {
      live = 1;
      const int64_t pos = p.pos[gr / p.group];
      const int64_t vis_lo = p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
      const int64_t n_sink = p.window == 0 ? 0 : int64_t(sinks) < vis_lo ? int64_t(sinks) : vis_lo;
      int64_t s_lo = vis_lo, s_hi = pos;
      const int zw = z - sink_split;  // the window's chunk (-1: this block takes the sinks)
      if (p.split && zw < 0) {
        s_lo = 0, s_hi = n_sink - 1;
      } else if (p.split) {
        const int64_t c = decode_chunk_keys(pos - vis_lo + 1, p.min_chunk);
        const int64_t start = (vis_lo / c + zw) * c;
        s_lo = start > vis_lo ? start : vis_lo;
        s_hi = start + c - 1 < pos ? start + c - 1 : pos;
      } else if (z > 0) {
        s_hi = -1;
      } else {
        sink = int(n_sink);
      }
      if (s_lo <= s_hi) lo = int(s_lo), hi = int(s_hi);
    }
    row_lo[tid] = lo;
    row_hi[tid] = hi;
    row_live[tid] = live;
    row_sink[tid] = sink;
    if (has_tree) row_tree[tid] = live ? p.tree_bits[gr / p.group] : 0;
  }
  __syncthreads();
  int h_lo = 0x7fffffff, h_hi = -1;  // hull of the rows' ranges
#pragma unroll
  for (int r = 0; r < R; ++r) {
    h_lo = min(h_lo, row_lo[r]), h_hi = max(h_hi, row_hi[r]);
    if (!kLean && row_sink[r] > 0) h_lo = 0, h_hi = max(h_hi, row_sink[r] - 1);
  }
  const int t_first = h_hi >= h_lo ? h_lo / TK * TK : 0;
  const int n_tiles = h_hi >= h_lo ? (h_hi - t_first) / TK + 1 : 0;

  const int k_tile_bytes = TK * p.k_units * 16;
  const int stage_bytes = k_tile_bytes + TK * p.v_units * 16;
  const uint8_t* Kg = p.k + int64_t(g) * p.k_head_bytes;
  const uint8_t* Vg = p.v + int64_t(g) * p.v_head_bytes;

  const int path_n = has_path ? p.path_n[qi] : 0;  // the block's query (TreePathDev)
  const int path_first = has_path ? int(p.pos[qi]) - path_n + 1 : 0;
  const int32_t* path_slots = has_path ? p.path_slots + int64_t(qi) * p.path_stride : nullptr;

  // This thread's 16-byte units of a tile (the same every tile): unit u = tid + 128 n of K is
  // unit w of key kk (u = kk * k_units + w), likewise for V.
  constexpr int kPerTensor = kMaxUnits / 2;
  const int k_total = TK * p.k_units, v_total = TK * p.v_units;
  int k_kw[kPerTensor], v_kw[kPerTensor];  // kk << 8 | w
#pragma unroll
  for (int n = 0; n < kPerTensor; ++n) {
    const int u = tid + n * kThreads, kk = u / p.k_units, kv = u / p.v_units;
    k_kw[n] = kk << 8 | (u - kk * p.k_units);
    v_kw[n] = kv << 8 | (u - kv * p.v_units);
  }

  // One tensor's units of tile t into its part of a stage. inner: every key of the tile is in the
  // hull and its slots neither wrap nor hold the store's last slot, so each unit is a plain
  // 16-byte copy from slot0 + kk (its span ends before the next slot's end, inside the store),
  // addressed with 32-bit offsets from the tile's first slot (p.inner_ok: kk * row_bytes fits).
  auto copy_units = [&](const int (&kw)[kPerTensor], int n_units, const uint8_t* base, const uint8_t* end,
                        int64_t row_bytes, uint8_t* dst, uint8_t* offs, int t, int slot0, bool inner) {
    const uint8_t* tile_base = base + int64_t(slot0) * row_bytes;
    const int rb = int(row_bytes);
#pragma unroll
    for (int n = 0; n < kPerTensor; ++n) {
      const int u = tid + n * kThreads;
      if (u >= n_units) break;
      const int kk = kw[n] >> 8, w = kw[n] & 0xff, j = t + kk;
      if (inner) {
        const uintptr_t a = reinterpret_cast<uintptr_t>(tile_base + unsigned(kk * rb));
        if (w == 0) offs[kk] = uint8_t(unsigned(a) & 15u);
        cp_async16(dst + u * 16, reinterpret_cast<const uint8_t*>(a & ~uintptr_t(15)) + 16 * w, 16);
        continue;
      }
      const uint8_t* src = base;
      int bytes = 0, off = 0;
      if (j >= h_lo && j <= h_hi) {
        int slot = slot0 + kk;
        while (slot >= p.capacity) slot -= p.capacity;  // once at most unless the ring is shorter than a tile
        if (path_slots && j >= path_first && j - path_first < path_n)
          slot = int((int64_t(path_first) + path_slots[j - path_first]) % p.capacity);
        const uint8_t* a = base + int64_t(slot) * row_bytes;
        off = int(reinterpret_cast<uintptr_t>(a) & 15u);
        src = a - off + 16 * w;
        const int64_t left = end - src;
        bytes = left >= 16 ? 16 : (left > 0 ? int(left) : 0);
        if (bytes == 0) src = base;
      }
      if (w == 0) offs[kk] = uint8_t(off);
      cp_async16(dst + u * 16, src, bytes);
    }
  };
  // Tile i into stage i % kStages (an empty group past the last tile keeps the counting uniform).
  // Tiles are issued in order, so the first slot of the next one is kept rather than divided out.
  unsigned next_slot = unsigned(t_first) % unsigned(p.capacity);
  auto issue = [&](int i) {
    if (i < n_tiles) {
      const int st = i % kStages, t = t_first + i * TK;
      uint8_t* sk = smem + st * stage_bytes;
      const int slot0 = int(next_slot);
      next_slot += unsigned(TK);
      while (next_slot >= unsigned(p.capacity)) next_slot -= unsigned(p.capacity);
      const bool inner = p.inner_ok && t >= h_lo && h_hi - t >= TK - 1 && p.capacity - slot0 > TK &&
                         (!has_path || t + TK <= path_first);  // no key of the path in it
      copy_units(k_kw, k_total, Kg, p.k_end, p.k_row_bytes, sk, k_off[st], t, slot0, inner);
      copy_units(v_kw, v_total, Vg, p.v_end, p.v_row_bytes, sk + k_tile_bytes, v_off[st], t, slot0, inner);
    }
    cp_async_commit();
  };

  // This thread: lane group grp (keys grp * 4 .. + 3 of each tile), dimensions 8c .. 8c + 7.
  const int grp = warp * GPW + lane / LK, c = lane % LK;
  // acc_m: sum of p * m over q4 V blocks (the lane's 8 dims are one block), added at the end.
  float qr[R][8], acc[R][8], acc_m[R], qsum[R], m[R], l[R];
  const int k_fmt = KF >= 0 ? KF : p.k_fmt, v_fmt = VF >= 0 ? VF : p.v_fmt;
  const bool k_f16 = k_fmt == kvq::kF16, k_q8 = k_fmt == kvq::kQ8, v_f16 = v_fmt == kvq::kF16, v_q4 = v_fmt == kvq::kQ4;
  int rlo[R], rhi[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    rlo[r] = row_lo[r];
    rhi[r] = row_hi[r];
    m[r] = -INFINITY;
    l[r] = 0.0f;
    const int gr = min(row0 + r, row_end - 1);  // padding rows compute on a real row, never written
    const int64_t orow = int64_t(gr / p.group) * p.n_head + int64_t(g) * p.group + gr % p.group;
    const float4* qp = reinterpret_cast<const float4*>(p.q + orow * HD + c * 8);
    const float4 a = qp[0], b = qp[1];
    qr[r][0] = a.x, qr[r][1] = a.y, qr[r][2] = a.z, qr[r][3] = a.w;
    qr[r][4] = b.x, qr[r][5] = b.y, qr[r][6] = b.z, qr[r][7] = b.w;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[r][e] = 0.0f;
    acc_m[r] = 0.0f;
    qsum[r] = qr[r][0];
#pragma unroll
    for (int e = 1; e < 8; ++e) qsum[r] = __fadd_rn(qsum[r], qr[r][e]);
  }

#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i);
  for (int i = 0; i < n_tiles; ++i) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile i landed for every thread; stage (i - 1) % kStages is free
    issue(i + kStages - 1);
    const int st = i % kStages, t = t_first + i * TK;
    const uint8_t* sk = smem + st * stage_bytes;
    const uint8_t* sv = sk + k_tile_bytes;

    // Scores: the lane's partial dot for each of its group's 4 keys, then a transposed butterfly:
    // two exchange steps leave each lane one key (kidx = 2 * bit(LK/2) + bit(LK/4) of the lane),
    // the remaining steps finish its sum (every lane of that key ends with the same bits).
    float P[kKeysPerGroup][R];
#pragma unroll
    for (int k = 0; k < kKeysPerGroup; ++k) {
      const int kk = grp * kKeysPerGroup + k;
      float x[8], bd, bm;
      codes8(k_fmt, sk + kk * p.k_units * 16, KF == kvq::kF16 ? 0 : k_off[st][kk], c, x, bd, bm);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float d = __fmul_rn(qr[r][0], x[0]);
#pragma unroll
        for (int e = 1; e < 8; ++e) d = __fmaf_rn(qr[r][e], x[e], d);
        P[k][r] = k_f16 ? d : k_q8 ? __fmul_rn(d, bd) : __fmaf_rn(d, bd, __fmul_rn(bm, qsum[r]));
      }
    }
    constexpr int B1 = LK / 2, B2 = LK / 4;
    const bool hi1 = (lane & B1) != 0, hi2 = (lane & B2) != 0;
    const int kidx = (hi1 ? 2 : 0) + (hi2 ? 1 : 0);
    float sc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float a2[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float keep = hi1 ? P[2 + h][r] : P[h][r], send = hi1 ? P[h][r] : P[2 + h][r];
        a2[h] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, B1));
      }
      const float keep = hi2 ? a2[1] : a2[0], send = hi2 ? a2[0] : a2[1];
      float d = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, B2));
#pragma unroll
      for (int o = LK / 8; o > 0; o >>= 1) d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, o));
      const int j = t + grp * kKeysPerGroup + kidx;
      bool seen = j >= rlo[r] && j <= rhi[r];
      if (sinks > 0 && !p.split) seen = seen || j < row_sink[r];  // unsplit: the sinks too
      if (has_tree) {  // tree mask: a new key j >= first only where its bit is set
        const int dj = j - p.tree_first;
        seen = seen && (dj < 0 || (dj < 64 && ((row_tree[r] >> dj) & 1u) != 0));
      }
      sc[r] = seen ? __fmul_rn(d, p.scale_log2) : -INFINITY;  // log2 units
    }
    // Online softmax over the 4 keys (each lane exponentiates its own key; p gathered for P.V).
    float pk[kKeysPerGroup][R];
    bool act[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float mx = fmaxf(sc[r], __shfl_xor_sync(0xffffffffu, sc[r], B1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, B2));
      act[r] = mx != -INFINITY;
      const float m_new = fmaxf(m[r], mx);
      const float p_own = act[r] ? exp2_ftz(sc[r] - m_new) : 0.0f;  // exp2(-inf) = 0 for unseen keys
#pragma unroll
      for (int k = 0; k < kKeysPerGroup; ++k)
        pk[k][r] = __shfl_sync(0xffffffffu, p_own, (lane & ~(B1 | B2)) | ((k & 2) ? B1 : 0) | ((k & 1) ? B2 : 0));
      if (!act[r]) continue;
      // A running max that did not move leaves alpha = 1, whose multiplications change nothing:
      // skip them (most tiles after the first few).
      float alpha = 1.0f;
      if (m_new != m[r]) {
        alpha = exp2_ftz(m[r] - m_new);  // 0 while m is -inf
        m[r] = m_new;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e] = __fmul_rn(acc[r][e], alpha);
        acc_m[r] = __fmul_rn(acc_m[r], alpha);
      }
      const float sum = __fadd_rn(__fadd_rn(__fadd_rn(pk[0][r], pk[1][r]), pk[2][r]), pk[3][r]);
      l[r] = __fmaf_rn(l[r], alpha, sum);
    }
#pragma unroll
    for (int k = 0; k < kKeysPerGroup; ++k) {
      const int kk = grp * kKeysPerGroup + k;
      float x[8], bd, bm;
      codes8(v_fmt, sv + kk * p.v_units * 16, VF == kvq::kF16 ? 0 : v_off[st][kk], c, x, bd, bm);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        // p == 0 (unseen or underflowed) adds nothing: skipping it keeps a row independent of
        // what the store holds at keys it does not see (zero-filled or another row's).
        if (!act[r] || pk[k][r] == 0.0f) continue;
        const float pd = v_f16 ? pk[k][r] : __fmul_rn(pk[k][r], bd);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e] = __fmaf_rn(pd, x[e], acc[r][e]);
        if (v_q4) acc_m[r] = __fmaf_rn(pk[k][r], bm, acc_m[r]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages are free: they take the groups' states

  // Merge the lane groups (fixed order), then this split's result.
  float* s_ml = reinterpret_cast<float*>(smem);  // (NG, R, 2)
  float* s_acc = s_ml + NG * R * 2;              // (NG, R, HD)
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (c == 0) s_ml[(grp * R + r) * 2] = m[r], s_ml[(grp * R + r) * 2 + 1] = l[r];
#pragma unroll
    for (int e = 0; e < 8; ++e) s_acc[(grp * R + r) * HD + c * 8 + e] = __fadd_rn(acc[r][e], acc_m[r]);
  }
  __syncthreads();
  const int64_t n_out_rows = int64_t(p.n_q) * p.n_head;
  auto out_row = [&](int r) {  // (query, head) row of the block's row r
    const int gr = row0 + r;
    return int64_t(gr / p.group) * p.n_head + int64_t(g) * p.group + gr % p.group;
  };
  for (int e = tid; e < R * HD; e += kThreads) {
    const int r = e / HD, d = e % HD;
    if (!row_live[r]) continue;
    float M = -INFINITY;
    for (int q = 0; q < NG; ++q) M = fmaxf(M, s_ml[(q * R + r) * 2]);
    float L = 0.0f, A = 0.0f;
    if (M != -INFINITY) {
      for (int q = 0; q < NG; ++q) {
        const float mq = s_ml[(q * R + r) * 2];
        if (mq == -INFINITY) continue;
        const float w = exp2f(mq - M);
        L = __fmaf_rn(w, s_ml[(q * R + r) * 2 + 1], L);
        A = __fmaf_rn(w, s_acc[(q * R + r) * HD + d], A);
      }
    }
    const int64_t orow = out_row(r);
    if (!p.split) {
      p.out[orow * HD + d] = L > 0.0f ? __fdiv_rn(A, L) : 0.0f;
    } else {
      const int64_t prow = int64_t(z) * n_out_rows + orow;
      p.part_acc[prow * HD + d] = A;
      if (d == 0) p.part_ml[prow * 2] = M, p.part_ml[prow * 2 + 1] = L;
    }
  }
  if (!p.split) return;

  // Last block done. Every thread's partials are made visible device-wide (fence) before thread 0
  // counts the block in; the block that sees splits - 1 blocks before it fences again (acquire)
  // and reads the others' partials through L2 (__ldcg: never the non-coherent path, never L1).
  // The counter is set back to 0 by that block: no other block of this launch touches it again,
  // and the next launch on the stream (next layer, next call, next replay of a graph) starts only
  // after this grid completes -- the kernel is never launched with PDL (measured: H100, 27B Q3_K_M
  // resident, 128-129 tok/s with PDL and a pdl_wait before the first read against 135 without), so
  // launches on one stream do not overlap. Two launches on one workspace on different streams at once would share
  // counters (and partials): callers must not do that (one stream per workspace).
  __shared__ int s_last;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    unsigned* count = p.counters + blockIdx.y * gridDim.x + blockIdx.x;
    s_last = atomicAdd(count, 1u) == gridDim.z - 1;
    if (s_last) {
      atomicExch(count, 0u);
      __threadfence();
    }
  }
  __syncthreads();
  if (!s_last) return;

  // The merge: the former combine kernel's operations per element (same order over z, same
  // explicitly rounded ops). Per live row, one warp finds M = max_z m_z and the weights w_z =
  // 2^(m_z - M) (-1: chunk z saw no key and is skipped, as m_z == -inf was), and its lane 0 sums
  // L = sum_z w_z l_z in order z = 0, 1, ... The stages are free (s_ml / s_acc were read above).
  const int splits = int(gridDim.z);
  float* s_w = reinterpret_cast<float*>(smem);  // (R, splits)
  float* s_l = s_w + R * splits;                // (R, splits)
  float* s_L = s_l + R * splits;                // (R)
  for (int r = warp; r < R; r += kWarps) {
    if (!row_live[r]) continue;  // warp-uniform
    const int64_t orow = out_row(r);
    float M = -INFINITY;  // max over the non-NaN m_z and -inf, in any order: fmaxf's, as before
    for (int zz = lane; zz < splits; zz += 32) {
      const float* ml = p.part_ml + (int64_t(zz) * n_out_rows + orow) * 2;
      const float mz = __ldcg(ml);
      s_w[r * splits + zz] = mz;
      s_l[r * splits + zz] = __ldcg(ml + 1);
      M = fmaxf(M, mz);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    for (int zz = lane; zz < splits; zz += 32) {
      const float mz = s_w[r * splits + zz];
      s_w[r * splits + zz] = mz == -INFINITY ? -1.0f : exp2f(mz - M);  // exp2f >= 0 (or NaN, not skipped)
    }
    __syncwarp();
    if (lane == 0) {
      float L = 0.0f;
      for (int zz = 0; zz < splits; ++zz) {
        const float w = s_w[r * splits + zz];
        if (w < 0.0f) continue;
        L = __fmaf_rn(w, s_l[r * splits + zz], L);
      }
      s_L[r] = L;
    }
  }
  __syncthreads();
  // Then A = sum_z w_z acc_z per (row, dim), in order z = 0, 1, ...: each thread 4 consecutive
  // dims of a row (one 16-byte load per chunk; the workspace is 16-byte aligned, split_fits), NP
  // such items, loads of kB chunks for all of them issued before any is used (one L2 round trip
  // per batch: this block alone reads the column's R x splits x head_dim partials). Lanes 8j ..
  // 8j + 7 of a warp hold one 32-dim block of one row, as round_store4 wants (the same codes as
  // round_store1's one element per lane: the same operations on the same 32 values).
  constexpr int NP = R * HD / (4 * kThreads) > 0 ? R * HD / (4 * kThreads) : 1;
  constexpr int kB = 16 / NP;
  bool ok[NP];
  int row[NP];     // the item's row in the block
  int64_t at[NP];  // its first element in out (and in each chunk's partial acc)
#pragma unroll
  for (int j = 0; j < NP; ++j) {
    const int e0 = (j * kThreads + tid) * 4;
    row[j] = min(e0 / HD, R - 1);
    ok[j] = e0 < R * HD && row_live[row[j]];
    at[j] = out_row(row[j]) * HD + e0 % HD;
  }
  float4 A[NP];
#pragma unroll
  for (int j = 0; j < NP; ++j) A[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int64_t chunk_stride = n_out_rows * HD;
  for (int z0 = 0; z0 < splits; z0 += kB) {
    float4 a[NP][kB];
#pragma unroll
    for (int j = 0; j < NP; ++j)
#pragma unroll
      for (int i = 0; i < kB; ++i)
        a[j][i] = ok[j] && z0 + i < splits
                      ? __ldcg(reinterpret_cast<const float4*>(p.part_acc + int64_t(z0 + i) * chunk_stride + at[j]))
                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int j = 0; j < NP; ++j)
#pragma unroll
      for (int i = 0; i < kB; ++i) {
        if (!ok[j] || z0 + i >= splits) continue;
        const float w = s_w[row[j] * splits + z0 + i];
        if (w < 0.0f) continue;
        A[j].x = __fmaf_rn(w, a[j][i].x, A[j].x);
        A[j].y = __fmaf_rn(w, a[j][i].y, A[j].y);
        A[j].z = __fmaf_rn(w, a[j][i].z, A[j].z);
        A[j].w = __fmaf_rn(w, a[j][i].w, A[j].w);
      }
  }
#pragma unroll
  for (int j = 0; j < NP; ++j) {
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (ok[j]) {
      const float L = s_L[row[j]];
      o.x = L > 0.0f ? __fdiv_rn(A[j].x, L) : 0.0f;
      o.y = L > 0.0f ? __fdiv_rn(A[j].y, L) : 0.0f;
      o.z = L > 0.0f ? __fdiv_rn(A[j].z, L) : 0.0f;
      o.w = L > 0.0f ? __fdiv_rn(A[j].w, L) : 0.0f;
      float* dst = p.out + at[j];  // out need not be 16-byte aligned
      dst[0] = o.x, dst[1] = o.y, dst[2] = o.z, dst[3] = o.w;
    }
    if (p.round.q) detail::round_store4(o, at[j], ok[j], p.round);  // every lane of the warp
  }
}

// ---- host side ----

constexpr int kMaxDevices = 64;
constexpr size_t kDefaultSmem = 48 * 1024 - 1024;  // dynamic bytes that need no opt-in (static below 1 KB)

int fmt_of(GgmlType t) { return t == GgmlType::F16 ? kvq::kF16 : t == GgmlType::Q8_0 ? kvq::kQ8 : kvq::kQ4; }

// 16-byte units that hold a head slice of `bytes` starting anywhere in its first unit (f16 slices
// are always 16-byte aligned: rows of n_head_kv * head_dim halves, head_dim % 8 == 0).
int units_of(GgmlType t, int64_t bytes) {
  if (t == GgmlType::F16) return int(bytes / 16);
  // Slice start <= 14 (q8) / 12 (q4) bytes into its first unit; q8 reads one word past its codes.
  return int(t == GgmlType::Q8_0 ? (bytes + 14 + 4 + 15) / 16 : (bytes + 12 + 15) / 16);
}

template <int HD>
size_t smem_bytes(int k_units, int v_units, int R) {
  const size_t stages = size_t(kStages) * Geo<HD>::TK * (k_units + v_units) * 16;
  const size_t merge = size_t(Geo<HD>::NG) * R * (HD + 2) * sizeof(float);
  return std::max(stages, merge);
}

template <int HD, int R, int KF, int VF, bool kLean>
Status launch_fmt(const DecParams& p, dim3 grid, cudaStream_t st) {
  const size_t smem = smem_bytes<HD>(p.k_units, p.v_units, R);
  // Opt in above the default 48 KB once per device and size (a driver call each launch costs
  // microseconds of host time that an eager decode step waits on).
  static std::atomic<int> opted[kMaxDevices] = {};
  int dev = 0;
  STRATA_TRY(detail::cuda_status(cudaGetDevice(&dev), "decode attention: cudaGetDevice"));
  if (smem > kDefaultSmem && (dev >= kMaxDevices || opted[dev].load(std::memory_order_relaxed) < int(smem))) {
    STRATA_TRY(detail::cuda_status(cudaFuncSetAttribute(decode_attention_kernel<HD, R, KF, VF, kLean>,
                                                        cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                                   "decode attention: cudaFuncSetAttribute"));
    if (dev < kMaxDevices) opted[dev].store(int(smem), std::memory_order_relaxed);
  }
  decode_attention_kernel<HD, R, KF, VF, kLean><<<grid, kThreads, smem, st>>>(p);
  return detail::launch_status("decode attention");
}

// The lean kernel (no tree, paths or sinks) where a call needs none and has at most two rows per
// block (decode with GQA up to 2); STRATA_ATTN_LEAN=0 turns it off (for an A/B).
bool lean_attention() {
  static const bool on = [] {
    const char* e = std::getenv("STRATA_ATTN_LEAN");
    return !(e && e[0] == '0');
  }();
  return on;
}

// A same-type pair F, lean where the call allows it (lean instances only for R <= 2: the compile
// time of this file grows with every instance).
template <int HD, int R, int F>
Status launch_same(const DecParams& p, dim3 grid, cudaStream_t st) {
  if constexpr (R <= 2) {
    if (!p.tree_bits && !p.path_slots && p.sinks == 0 && lean_attention())
      return launch_fmt<HD, R, F, F, true>(p, grid, st);
  }
  return launch_fmt<HD, R, F, F, false>(p, grid, st);
}

// Same-type pairs get their decoders fixed at compile time; mixed pairs switch per key.
template <int HD, int R>
Status launch(const DecParams& p, dim3 grid, cudaStream_t st) {
  if (p.k_fmt == p.v_fmt) {
    switch (p.k_fmt) {
      case kvq::kF16: return launch_same<HD, R, kvq::kF16>(p, grid, st);
      case kvq::kQ8: return launch_same<HD, R, kvq::kQ8>(p, grid, st);
      default: return launch_same<HD, R, kvq::kQ4>(p, grid, st);
    }
  }
  return launch_fmt<HD, R, -1, -1, false>(p, grid, st);
}

template <int HD>
Status launch_rows(const DecParams& p, dim3 grid, int R, cudaStream_t st) {
  switch (R) {
    case 1: return launch<HD, 1>(p, grid, st);
    case 2: return launch<HD, 2>(p, grid, st);
    case 4: return launch<HD, 4>(p, grid, st);
    default: return launch<HD, 8>(p, grid, st);
  }
}

// Splits a grid must hold for rows of a store: at most kDecodeTargetSplits, at most
// ceil(n / min chunk) for n visible keys, one more where a window's range starts unaligned.
int64_t grid_splits(int64_t max_visible, bool windowed, int64_t head_dim) {
  const int64_t n = std::max<int64_t>(max_visible, 1);
  const int64_t c = decode_min_chunk_keys(head_dim);
  return std::min(kDecodeTargetSplits, (n + c - 1) / c) + (windowed ? 1 : 0);
}

// Plus one for sinks (their own chunk, z = 0).
int64_t store_splits(const KvStoreDev& kv, const AttentionShapeDev& s) {
  const int64_t max_visible = s.window > 0 ? std::min(s.window, kv.capacity) : kv.capacity;
  return grid_splits(max_visible, s.window > 0, s.head_dim) + (s.window > 0 && s.sinks > 0 ? 1 : 0);
}

}  // namespace

int64_t decode_min_chunk_keys(int64_t head_dim) {
  static const int64_t chosen = [] {
    const char* e = std::getenv("STRATA_ATTN_MIN_CHUNK");
    const int64_t v = e ? std::atoll(e) : 0;
    return v >= 16 && v <= 4096 && (v & (v - 1)) == 0 ? v : kDecodeMinChunk;
  }();
  return std::max<int64_t>(chosen, 4096 / std::max<int64_t>(head_dim, 1));
}

size_t attention_partial_bytes(Workspace ws) {
  if (!ws.d_ptr || ws.bytes < kAttentionCounterBytes) return 0;
  return (ws.bytes - kAttentionCounterBytes) & ~size_t(15);
}

unsigned* attention_counters(Workspace ws) {
  if (!ws.d_ptr || ws.bytes < kAttentionCounterBytes) return nullptr;
  return reinterpret_cast<unsigned*>(static_cast<uint8_t*>(ws.d_ptr) + attention_partial_bytes(ws));
}

bool decode_attention_split_fits(int64_t n_q, const KvStoreDev& kv, const AttentionShapeDev& s, Workspace ws) {
  const int64_t splits = store_splits(kv, s);
  const size_t per_split = size_t(n_q * s.n_head) * size_t(s.head_dim + 2) * sizeof(float);
  // Counters: at most one per (query, head) row (a block column holds at least one row). The merge
  // reads the partials 16 bytes at a time.
  return splits == 1 || (n_q * s.n_head <= kDecodeMaxCounters && reinterpret_cast<uintptr_t>(ws.d_ptr) % 16 == 0 &&
                         attention_partial_bytes(ws) >= size_t(splits) * per_split);
}

bool decode_attention_applies(int64_t n_q, int64_t head_dim, GgmlType k, GgmlType v) {
  auto ok = [](GgmlType t) { return t == GgmlType::F16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_1; };
  return n_q >= 1 && n_q <= kDecodeMaxQueries && ok(k) && ok(v) &&
         (head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256);
}

size_t decode_attention_workspace_bytes(int64_t n_q, const AttentionShapeDev& s, int64_t max_keys) {
  const int64_t nq = std::min(n_q, kDecodeMaxQueries);
  if (nq <= 0 || s.n_head <= 0 || s.head_dim <= 0) return 0;
  // Windowed or not, with sinks or not (+ 1: their chunk): the engine sizes one workspace for all
  // layers with window 0.
  const int64_t z = grid_splits(max_keys, true, s.head_dim) + 1;
  return size_t(z) * size_t(nq * s.n_head) * size_t(s.head_dim + 2) * sizeof(float);
}

Status decode_attention(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                        const AttentionShapeDev& s, float* d_out, Workspace ws, cudaStream_t st,
                        const TreeMaskDev* tree, const ActRounding* round, bool* rounded, const TreePathDev* path) {
  if (rounded) *rounded = false;
  if (kv.capacity > 0x7fffffff || n_q * s.n_head > 0x7fffffff)
    return Status::error("decode attention: capacity {} or rows {} too large", kv.capacity, n_q * s.n_head);
  DecParams p{};
  p.q = d_q;
  p.pos = d_pos;
  p.k = static_cast<const uint8_t*>(kv.d_k);
  p.v = static_cast<const uint8_t*>(kv.d_v);
  const int64_t width = s.n_head_kv * s.head_dim;
  p.k_row_bytes = int64_t(ggml_row_bytes(kv.k_dtype, uint64_t(width)));
  p.v_row_bytes = int64_t(ggml_row_bytes(kv.v_dtype, uint64_t(width)));
  p.k_end = p.k + kv.capacity * p.k_row_bytes;
  p.v_end = p.v + kv.capacity * p.v_row_bytes;
  p.k_head_bytes = int64_t(ggml_row_bytes(kv.k_dtype, uint64_t(s.head_dim)));
  p.v_head_bytes = int64_t(ggml_row_bytes(kv.v_dtype, uint64_t(s.head_dim)));
  p.k_fmt = fmt_of(kv.k_dtype);
  p.v_fmt = fmt_of(kv.v_dtype);
  p.k_units = units_of(kv.k_dtype, p.k_head_bytes);
  p.v_units = units_of(kv.v_dtype, p.v_head_bytes);
  p.out = d_out;
  p.n_q = int(n_q);
  p.n_head = int(s.n_head);
  p.group = int(s.n_head / s.n_head_kv);
  p.capacity = int(kv.capacity);
  p.window = int(std::min<int64_t>(s.window, 0x7fffffff));
  p.sinks = s.window > 0 ? int(std::min<int64_t>(s.sinks, 0x7fffffff)) : 0;
  p.scale_log2 = s.scale * 1.4426950408889634f;
  p.min_chunk = int(decode_min_chunk_keys(s.head_dim));
  p.inner_ok = (4096 / s.head_dim) * std::max(p.k_row_bytes, p.v_row_bytes) <= 0x7fffffff;
  if (tree && tree->d_bits) p.tree_bits = tree->d_bits, p.tree_first = tree->first;
  const bool paths = path && path->d_slots;
  if (paths) p.path_slots = path->d_slots, p.path_n = path->d_n, p.path_stride = path->stride;

  // Splits: fixed by the store and the window (never by n_q), as far as the workspace holds them.
  const bool fits = decode_attention_split_fits(n_q, kv, s, ws);
  if (paths && n_q > 1 && fits != decode_attention_split_fits(1, kv, s, ws))
    return Status::error("decode attention: the workspace holds the splits of one tree path, not of {}", n_q);
  const int64_t splits = fits ? store_splits(kv, s) : 1;
  p.split = splits > 1;
  p.sink_split = p.split && p.sinks > 0 ? 1 : 0;
  if (p.split) {
    p.part_acc = static_cast<float*>(ws.d_ptr);
    p.part_ml = p.part_acc + size_t(splits) * size_t(n_q * s.n_head) * size_t(s.head_dim);
    p.counters = attention_counters(ws);
    if (round && round->q) p.round = *round;
  }
  // Per tensor TK * units <= 512 for every format and head_dim (f16: exactly 512), so a tile is
  // at most kMaxUnits copies per thread.
  if ((4096 / s.head_dim) * std::max(p.k_units, p.v_units) > kMaxUnits / 2 * kThreads)
    return Status::error("decode attention: tile of {} units exceeds the copy plan", (4096 / s.head_dim) * std::max(p.k_units, p.v_units));
  // Tree paths: blocks as for one query (R from one query's rows), path_tiles of them per query.
  const int64_t rows = paths ? p.group : n_q * p.group;
  const int R = rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : 8;
  p.path_tiles = int((rows + R - 1) / R);
  const int64_t tiles = paths ? n_q * p.path_tiles : p.path_tiles;
  if (s.n_head_kv > 65535) return Status::error("decode attention: {} KV heads: grid too large", s.n_head_kv);
  if (p.split && tiles * s.n_head_kv > kDecodeMaxCounters)  // split_fits bounds it by n_q * n_head
    return Status::error("decode attention: {} block columns exceed the {} counters", tiles * s.n_head_kv, kDecodeMaxCounters);
  const dim3 grid(unsigned(tiles), unsigned(s.n_head_kv), unsigned(splits));
  auto run = [&]() -> Status {
    switch (s.head_dim) {
      case 32: return launch_rows<32>(p, grid, R, st);
      case 64: return launch_rows<64>(p, grid, R, st);
      case 128: return launch_rows<128>(p, grid, R, st);
      case 256: return launch_rows<256>(p, grid, R, st);
      default: return Status::error("decode attention: head_dim {} unsupported", s.head_dim);
    }
  };
  STRATA_TRY(run());
  if (rounded) *rounded = p.round.q != nullptr;
  return Status::ok();
}

}  // namespace strata::kernels::cuda
