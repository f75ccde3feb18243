// Flash-decoding attention (attention_decode.h): 1..64 queries over f16 / Q8_0 / Q4_1 KV, read
// in place, with Q.K^T and P.V on tensor cores (attention_decode_frag.cuh).
//
// Grid: (row tiles, n_head_kv, splits). For KV head g the rows are the (query, head) pairs whose
// head maps to g (row r = query r / group, head g * group + r % group); a block takes R = 8
// consecutive rows (the n = 8 side of every mma), so all the query heads of a GQA group (and
// several queries) share each KV load. blockIdx.z picks chunk z of every row's keys
// (decode_chunk_keys: <= 32 chunks of a power-of-two multiple of 256 keys, aligned to absolute
// positions); the block walks the union of its rows' chunk-z ranges in tiles of TK = 64 keys, 16
// per warp.
//
// Loads: each key's head slice is copied raw (the 16-byte-aligned span around it) into a
// cp.async ring in shared memory (2-4 stages, ~48 KB), 16-byte copies only; keys outside the rows'
// ranges are zero-filled, and so are bytes past the end of the store.
//
// Compute, per warp and 16 keys (g = lane / 4, t = lane % 4):
//   S^T = K Q^T: mma m16n8k16 f16, M = the 16 keys, N = the 8 rows, K = 16 dimensions per step.
//     K enters as exact f16 (f16 values, q8 codes, q4 nibbles: dims 32 b + 8 t .. + 7 of keys g
//     and g + 8 per lane, a permutation of the k index that both operands share); Q as two f16
//     halves (q = hi + lo). Quantised K: each 32-dim block's partial S is scaled by the key's d
//     (+ m * sum of the block's q for q4) in f32. The lane then holds keys g, g + 8 x rows 2t, 2t + 1.
//   online softmax per row in log2 units (max over the 16 keys: 3 shuffles), p transposed through
//     a 2.5 KB per-warp scratch into the P.V operand layout (row g, keys t + 4i);
//   O^T += V^T P^T: mma m16n8k8 tf32, M = 16 dimensions (32 b + 4 g + 2 j, + 1 for m-tile j),
//     N = the 8 rows, K = 8 keys; V as exact tf32 values / codes, p d (d: the key's V block scale)
//     as two tf32 halves. q4 V's offsets: sum p m per row and block, added at the end.
//   Every warp keeps its own (m, l, O^T) per row; the block merges its 4 warps in a fixed order
//   and writes the chunk's (m, l, acc) to the workspace, and combine_kernel merges the chunks of
//   a row in order z = 0, 1, ... (or, unsplit, writes acc / l itself).
//
// Precision against the f32 CPU kernel (tests: |gpu - cpu| <= 2e-5 + 1e-3 |cpu|): the KV values
// and the products of the mma are exact; the rounding introduced is (a) the split operands,
// q = hi + lo in f16 (|q - hi - lo| <= 2^-22 |q|, or 2^-25 absolute where lo is subnormal, |q| <
// 2^-3; |q| must stay below 65504) and p d = hi + lo in tf32 (2^-22 relative, f32's range), and
// (b) the tensor core's f32 accumulation order (and its truncating adds) within one mma: about
// f32's 2^-24 per add. Both are ~1e-6 relative on a score or an output, three orders below the bound.
//
// Determinism and batch exactness: no float atomics, every sum in a fixed order; an mma output
// element depends only on its own row of Q (column of S^T) and the keys, and a row's keys, tiles,
// chunks, warps and lanes depend only on its own position, so a row of a k-query call equals the
// query run alone. Keys a row does not see get p = 0 and a tile without any leaves the row's
// state untouched; the keys of a tile are all finite (zero-filled or written KV) so 0 * V = 0.
//
// Measured (H200, `strata bench kernels`, 1 query, 16 KV heads x 128, GQA 2, 32K / 128K keys; read
// ceiling 4.4 TB/s): q8_0 107 / 368 us (30 / 35% of read), q4_1 96 / 315 us (20 / 24%), f16 164 /
// 571 us (37 / 43%); the SIMT kernel (attention_decode_simt.cu): q8_0 110 / 382, q4_1 93 / 314, f16
// 109 / 378. decode_attention_uses_simt picks per format. What limits it (ncu, q4_1 and q8_0 at
// 128K): instruction issue, not DRAM (18-27% of peak) nor the tensor pipe: ~90 warp instructions
// per key and KV head (IPC 2.7, 66% of issue slots, ALU the busiest pipe: byte permutes, shifts and
// address arithmetic of the per-value conversions and the copy plan), 16 warps per SM (128
// registers; the grid of 16 heads x 32 splits is ~4 blocks per SM anyway). The per-value work is
// the floor left: every K and V value is converted once per key (8 per lane), for 2 live rows of 8.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/attention_decode.h"
#include "kernels/cuda/attention_decode_frag.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/kv_quant.cuh"

namespace strata::kernels::cuda {
namespace {

constexpr int kThreads = 128, kWarps = kThreads / 32;
constexpr int R = 8;                     // rows per block: the mma's n
constexpr int TK = 16 * kWarps;          // keys per tile: 16 per warp (the mma's m for Q.K^T)
constexpr int kMaxStages = 4;
constexpr int kStageBudget = 48 * 1024;  // bytes of cp.async ring a block aims for
constexpr int kPsStride = 20;            // floats per row of the P scratch: conflict-free both ways

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
  int k_stride, v_stride;              // bytes per key in a stage (units * 16, padded for banks)
  int stages;                          // 2..kMaxStages
  float* out;
  float* part_acc;  // (splits, n_q * n_head, head_dim) when split
  float* part_ml;   // (splits, n_q * n_head, 2): m, l
  int n_q, n_head, group, capacity, window;
  int split;  // 0: one block per row tile covers all keys and writes out directly
  const uint64_t* tree_bits;  // per query, or null: no tree mask (TreeMaskDev)
  int tree_first;
  float scale_log2;  // scale / ln 2: scores in log2 units (exp2 is one instruction)
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Waits until at most n (0..2) groups are pending.
__device__ __forceinline__ void cp_async_wait_n(int n) {
  if (n <= 0) cp_async_wait<0>();
  else if (n == 1) cp_async_wait<1>();
  else cp_async_wait<2>();
}

// Dynamic shared memory: the stage ring (aliased by the warps' merge at the end), then the Q
// fragments (HD / 32 blocks x 32 lanes x {hi, lo} x 4 f16 pairs).
template <int HD>
struct Smem {
  static constexpr size_t merge = size_t(kWarps) * R * (HD + 2) * sizeof(float);
  static constexpr size_t q_frag = size_t(HD) * 32;
  __host__ __device__ static size_t ring(int stages, int stage_bytes) {
    const size_t ring = size_t(stages) * size_t(stage_bytes);
    return ((ring > merge ? ring : merge) + 15) / 16 * 16;
  }
};

// KF, VF: the K and V formats when fixed at compile time (the same-type pairs), else -1 (p's).
template <int HD, int KF, int VF>
__global__ void __launch_bounds__(kThreads, HD <= 128 ? 4 : 2) decode_attention_kernel(DecParams p) {
  constexpr int NB = HD / 32;  // 32-dim blocks (quant blocks) per head
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int row_lo[R], row_hi[R];  // this split's key range per row (empty: lo > hi)
  __shared__ int row_live[R];           // a row of the call (not padding)
  __shared__ uint64_t row_tree[R];      // tree mask word per row (tree_bits only)
  __shared__ uint8_t k_off[kMaxStages][TK], v_off[kMaxStages][TK];  // slice start within its first unit
  __shared__ float q_sum[R][NB];                   // sum of q over each block (q4 K's m term)
  __shared__ float p_scr[kWarps][R * kPsStride];  // p of the warp's 16 keys, (row, key)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int kvh = blockIdx.y, z = blockIdx.z;
  const int n_rows = p.n_q * p.group;
  const int row0 = blockIdx.x * R;
  const int k_fmt = KF >= 0 ? KF : p.k_fmt, v_fmt = VF >= 0 ? VF : p.v_fmt;
  const bool k_f16 = k_fmt == kvq::kF16, k_q4 = k_fmt == kvq::kQ4;
  const bool v_f16 = v_fmt == kvq::kF16, v_q4 = v_fmt == kvq::kQ4;
  const int k_stride = p.k_stride, v_stride = p.v_stride, ns = p.stages;
  const int k_tile_bytes = TK * k_stride, stage_bytes = k_tile_bytes + TK * v_stride;
  uint4* q_frag = reinterpret_cast<uint4*>(smem + Smem<HD>::ring(ns, stage_bytes));

  auto out_row = [&](int gr) {
    return int64_t(gr / p.group) * p.n_head + int64_t(kvh) * p.group + gr % p.group;
  };
  if (tid < R) {
    const int gr = row0 + tid;
    int lo = 0x7fffffff, hi = -1, live = 0;
    if (gr < n_rows) {
      live = 1;
      const int64_t pos = p.pos[gr / p.group];
      const int64_t vis_lo = p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
      int64_t s_lo = vis_lo, s_hi = pos;
      if (p.split) {
        const int64_t c = decode_chunk_keys(pos - vis_lo + 1);
        const int64_t start = (vis_lo / c + z) * c;
        s_lo = start > vis_lo ? start : vis_lo;
        s_hi = start + c - 1 < pos ? start + c - 1 : pos;
      } else if (z > 0) {
        s_hi = -1;
      }
      if (s_lo <= s_hi) lo = int(s_lo), hi = int(s_hi);
    }
    row_lo[tid] = lo;
    row_hi[tid] = hi;
    row_live[tid] = live;
    if (p.tree_bits) row_tree[tid] = live ? p.tree_bits[gr / p.group] : 0;
  }
  // Q as the B operand of S^T = K Q^T: lane (g, t) of block b holds row g's dims 32 b + 8 t .. + 7
  // as four f16 pairs, hi and lo (zeros for padding rows).
  for (int e = tid; e < HD; e += kThreads) {
    const int b = e >> 5, gq = (e & 31) >> 2, tq = e & 3, gr = row0 + gq;
    uint4 hi = make_uint4(0, 0, 0, 0), lo = hi;
    if (gr < n_rows) {
      const float4* qp = reinterpret_cast<const float4*>(p.q + out_row(gr) * HD + b * 32 + tq * 8);
      const float4 a = qp[0], c = qp[1];
      dec::split_f16x2(a.x, a.y, hi.x, lo.x);
      dec::split_f16x2(a.z, a.w, hi.y, lo.y);
      dec::split_f16x2(c.x, c.y, hi.z, lo.z);
      dec::split_f16x2(c.z, c.w, hi.w, lo.w);
    }
    q_frag[e * 2] = hi;
    q_frag[e * 2 + 1] = lo;
  }
  if (k_q4) {
    for (int e = tid; e < R * NB; e += kThreads) {
      const int r = e / NB, b = e % NB, gr = row0 + r;
      float sum = 0.0f;
      if (gr < n_rows) {
        const float* qp = p.q + out_row(gr) * HD + b * 32;
        for (int i = 0; i < 32; ++i) sum = __fadd_rn(sum, qp[i]);
      }
      q_sum[r][b] = sum;
    }
  }
  __syncthreads();
  int h_lo = 0x7fffffff, h_hi = -1;  // hull of the rows' ranges
#pragma unroll
  for (int r = 0; r < R; ++r) h_lo = min(h_lo, row_lo[r]), h_hi = max(h_hi, row_hi[r]);
  const int t_first = h_hi >= h_lo ? h_lo / TK * TK : 0;
  const int n_tiles = h_hi >= h_lo ? (h_hi - t_first) / TK + 1 : 0;
  const uint8_t* Kg = p.k + int64_t(kvh) * p.k_head_bytes;
  const uint8_t* Vg = p.v + int64_t(kvh) * p.v_head_bytes;

  // Copy plan of one tensor: this thread's units u = tid, tid + 128, ... of a tile are unit w of
  // key kk (u = kk * units + w), walked incrementally (no division per tile).
  struct Plan {
    int kk0, w0, dk, dw;
  };
  auto plan_of = [&](int units) { return Plan{tid / units, tid % units, kThreads / units, kThreads % units}; };
  const Plan kplan = plan_of(p.k_units), vplan = plan_of(p.v_units);
  auto copy_tensor = [&](const Plan& pl, int units, int stride, const uint8_t* base, const uint8_t* end,
                         int64_t row_bytes, uint8_t* dst, uint8_t* offs, int t0, int slot0) {
    int kk = pl.kk0, w = pl.w0;
    for (int u = tid; u < TK * units; u += kThreads) {
      const int j = t0 + kk;
      const uint8_t* src = base;
      int bytes = 0, off = 0;
      if (j >= h_lo && j <= h_hi) {
        int slot = slot0 + kk;
        while (slot >= p.capacity) slot -= p.capacity;  // once at most unless the ring is shorter than a tile
        const uint8_t* a = base + int64_t(slot) * row_bytes;
        off = int(reinterpret_cast<uintptr_t>(a) & 15u);
        src = a - off + 16 * w;
        const int64_t left = end - src;
        bytes = left >= 16 ? 16 : (left > 0 ? int(left) : 0);
        if (bytes == 0) src = base;
      }
      if (w == 0) offs[kk] = uint8_t(off);
      cp_async16(dst + kk * stride + w * 16, src, bytes);
      kk += pl.dk, w += pl.dw;
      if (w >= units) w -= units, ++kk;
    }
  };
  // Tile i into stage i % ns (an empty group past the last tile keeps the counting uniform).
  auto issue = [&](int i) {
    if (i < n_tiles) {
      const int st = i % ns, t0 = t_first + i * TK;
      uint8_t* sk = smem + st * stage_bytes;
      const int slot0 = int(unsigned(t0) % unsigned(p.capacity));
      copy_tensor(kplan, p.k_units, k_stride, Kg, p.k_end, p.k_row_bytes, sk, k_off[st], t0, slot0);
      copy_tensor(vplan, p.v_units, v_stride, Vg, p.v_end, p.v_row_bytes, sk + k_tile_bytes, v_off[st], t0, slot0);
    }
    cp_async_commit();
  };

  // Per lane: rows 2t and 2t + 1 of S^T and O^T (running max m, partial sum l over its keys).
  const int lo0 = row_lo[2 * t], hi0 = row_hi[2 * t], lo1 = row_lo[2 * t + 1], hi1 = row_hi[2 * t + 1];
  const bool tree = p.tree_bits != nullptr;
  const uint64_t tb0 = tree ? row_tree[2 * t] : 0, tb1 = tree ? row_tree[2 * t + 1] : 0;
  // Tree mask: key j (>= first) only where bit j - first is set; no bit for j >= first + 64.
  auto tree_sees = [&](int j, uint64_t bits) {
    const int d = j - p.tree_first;
    return d < 0 || (d < 64 && ((bits >> d) & 1u) != 0);
  };
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  float o[2 * NB][4];  // m-tile 2 b + j: dims 32 b + 4 g + 2 j (c0, c1) and + 1 (c2, c3)
  float am[NB][2];     // q4 V: sum p m per block, rows 2t, 2t + 1 (this lane's keys)
#pragma unroll
  for (int i = 0; i < 2 * NB; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
#pragma unroll
  for (int b = 0; b < NB; ++b) am[b][0] = am[b][1] = 0.0f;
  float* ps = p_scr[warp];
  const int kw0 = warp * 16;  // the warp's keys within a tile

  for (int i = 0; i < ns - 1; ++i) issue(i);
  for (int i = 0; i < n_tiles; ++i) {
    cp_async_wait_n(ns - 2);
    __syncthreads();  // tile i landed for every thread; stage (i - 1) % ns is free
    issue(i + ns - 1);
    const int st = i % ns, t0 = t_first + i * TK;
    if (t0 + kw0 > h_hi || t0 + kw0 + 15 < h_lo) continue;  // no row sees any of the warp's keys
    const uint8_t* sk = smem + st * stage_bytes;
    const uint8_t* sv = sk + k_tile_bytes;

    // S^T for keys ka = kw0 + g, kb = ka + 8 (c0, c1 | c2, c3) and rows 2t, 2t + 1.
    const int ka = kw0 + g, kb = ka + 8;
    const uint8_t* pka = sk + ka * k_stride + k_off[st][ka];
    const uint8_t* pkb = sk + kb * k_stride + k_off[st][kb];
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float s_odd[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // f16 K: odd blocks, two shorter mma chains
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      const uint4 qh = q_frag[(b * 32 + lane) * 2], ql = q_frag[(b * 32 + lane) * 2 + 1];
      uint32_t ha[4], hb[4];
      float da, ma, db, mb;
      dec::k_frag<KF>(k_fmt, pka, b, t, ha, da, ma);
      dec::k_frag<KF>(k_fmt, pkb, b, t, hb, db, mb);
      if (k_f16) {
        float(&acc)[4] = (b & 1) ? s_odd : s;
        dec::mma_f16(acc, ha[0], hb[0], ha[1], hb[1], qh.x, qh.y);
        dec::mma_f16(acc, ha[0], hb[0], ha[1], hb[1], ql.x, ql.y);
        dec::mma_f16(acc, ha[2], hb[2], ha[3], hb[3], qh.z, qh.w);
        dec::mma_f16(acc, ha[2], hb[2], ha[3], hb[3], ql.z, ql.w);
      } else {
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        dec::mma_f16(c, ha[0], hb[0], ha[1], hb[1], qh.x, qh.y);
        dec::mma_f16(c, ha[0], hb[0], ha[1], hb[1], ql.x, ql.y);
        dec::mma_f16(c, ha[2], hb[2], ha[3], hb[3], qh.z, qh.w);
        dec::mma_f16(c, ha[2], hb[2], ha[3], hb[3], ql.z, ql.w);
        if (k_q4) {
          const float qs0 = q_sum[2 * t][b], qs1 = q_sum[2 * t + 1][b];
          s[0] = __fmaf_rn(ma, qs0, s[0]);
          s[1] = __fmaf_rn(ma, qs1, s[1]);
          s[2] = __fmaf_rn(mb, qs0, s[2]);
          s[3] = __fmaf_rn(mb, qs1, s[3]);
        }
        s[0] = __fmaf_rn(da, c[0], s[0]);
        s[1] = __fmaf_rn(da, c[1], s[1]);
        s[2] = __fmaf_rn(db, c[2], s[2]);
        s[3] = __fmaf_rn(db, c[3], s[3]);
      }
    }
    if (k_f16 && NB > 1) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[e] = __fadd_rn(s[e], s_odd[e]);
    }
    const int ja = t0 + ka, jb = t0 + kb;
    s[0] = ja >= lo0 && ja <= hi0 ? __fmul_rn(s[0], p.scale_log2) : -INFINITY;  // log2 units
    s[1] = ja >= lo1 && ja <= hi1 ? __fmul_rn(s[1], p.scale_log2) : -INFINITY;
    s[2] = jb >= lo0 && jb <= hi0 ? __fmul_rn(s[2], p.scale_log2) : -INFINITY;
    s[3] = jb >= lo1 && jb <= hi1 ? __fmul_rn(s[3], p.scale_log2) : -INFINITY;
    if (tree) {  // a uniform branch: calls without a mask pay one test per 16 keys
      if (!tree_sees(ja, tb0)) s[0] = -INFINITY;
      if (!tree_sees(ja, tb1)) s[1] = -INFINITY;
      if (!tree_sees(jb, tb0)) s[2] = -INFINITY;
      if (!tree_sees(jb, tb1)) s[3] = -INFINITY;
    }

    // Online softmax per row over the warp's 16 keys (the 8 lanes of one t hold them).
    float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    float pr[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float al0 = 1.0f, al1 = 1.0f;
    if (mx0 != -INFINITY) {  // else no key of row 2t here: its state stays as it is
      const float mn = fmaxf(m0, mx0);
      al0 = exp2f(m0 - mn);  // 0 while m is -inf
      pr[0] = exp2f(s[0] - mn), pr[2] = exp2f(s[2] - mn);
      l0 = __fmaf_rn(l0, al0, __fadd_rn(pr[0], pr[2]));
      m0 = mn;
    }
    if (mx1 != -INFINITY) {
      const float mn = fmaxf(m1, mx1);
      al1 = exp2f(m1 - mn);
      pr[1] = exp2f(s[1] - mn), pr[3] = exp2f(s[3] - mn);
      l1 = __fmaf_rn(l1, al1, __fadd_rn(pr[1], pr[3]));
      m1 = mn;
    }
    if (al0 != 1.0f) {
#pragma unroll
      for (int mt = 0; mt < 2 * NB; ++mt) o[mt][0] = __fmul_rn(o[mt][0], al0), o[mt][2] = __fmul_rn(o[mt][2], al0);
#pragma unroll
      for (int b = 0; b < NB; ++b) am[b][0] = __fmul_rn(am[b][0], al0);
    }
    if (al1 != 1.0f) {
#pragma unroll
      for (int mt = 0; mt < 2 * NB; ++mt) o[mt][1] = __fmul_rn(o[mt][1], al1), o[mt][3] = __fmul_rn(o[mt][3], al1);
#pragma unroll
      for (int b = 0; b < NB; ++b) am[b][1] = __fmul_rn(am[b][1], al1);
    }
    if (v_q4) {  // sum p m over this lane's keys ka, kb
      const uint8_t* pva = sv + ka * v_stride + v_off[st][ka];
      const uint8_t* pvb = sv + kb * v_stride + v_off[st][kb];
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        const float ma = dec::v_offset(kvq::kQ4, pva, b), mb = dec::v_offset(kvq::kQ4, pvb, b);
        am[b][0] = __fmaf_rn(pr[2], mb, __fmaf_rn(pr[0], ma, am[b][0]));
        am[b][1] = __fmaf_rn(pr[3], mb, __fmaf_rn(pr[1], ma, am[b][1]));
      }
    }

    // P into the P.V operand layout: lane (g, t) takes row g's p of keys t + 4i.
    ps[2 * t * kPsStride + g] = pr[0];
    ps[(2 * t + 1) * kPsStride + g] = pr[1];
    ps[2 * t * kPsStride + g + 8] = pr[2];
    ps[(2 * t + 1) * kPsStride + g + 8] = pr[3];
    __syncwarp();
    float pv[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) pv[k] = ps[g * kPsStride + t + 4 * k];
    __syncwarp();

    // O^T += V^T P^T: k-step kk takes keys t + 8 kk (k index t) and t + 4 + 8 kk (k index t + 4).
    uint32_t fh[4], fl[4];  // f16 V: p itself, split once for every block
    if (v_f16) {
#pragma unroll
      for (int k = 0; k < 4; ++k) dec::split_tf32(pv[k], fh[k], fl[k]);
    }
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int k1 = kw0 + t + 8 * kk, k2 = k1 + 4;
      const uint8_t* pv1 = sv + k1 * v_stride + v_off[st][k1];
      const uint8_t* pv2 = sv + k2 * v_stride + v_off[st][k2];
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        float x1[4], x2[4], d1, d2;
        dec::v_frag<VF>(v_fmt, pv1, b, g, x1, d1);
        dec::v_frag<VF>(v_fmt, pv2, b, g, x2, d2);
        uint32_t h1, l1, h2, l2;
        if (v_f16) {
          h1 = fh[2 * kk], l1 = fl[2 * kk], h2 = fh[2 * kk + 1], l2 = fl[2 * kk + 1];
        } else {
          dec::split_tf32(__fmul_rn(pv[2 * kk], d1), h1, l1);
          dec::split_tf32(__fmul_rn(pv[2 * kk + 1], d2), h2, l2);
        }
        dec::mma_tf32(o[2 * b], x1[0], x1[1], x2[0], x2[1], h1, h2);
        dec::mma_tf32(o[2 * b], x1[0], x1[1], x2[0], x2[1], l1, l2);
        dec::mma_tf32(o[2 * b + 1], x1[2], x1[3], x2[2], x2[3], h1, h2);
        dec::mma_tf32(o[2 * b + 1], x1[2], x1[3], x2[2], x2[3], l1, l2);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages are free: they take the warps' states

  // Per warp and row: l and q4's sum p m over the 8 lanes of one t (a butterfly: every lane ends
  // with the same bits), then (m, l, O) into shared memory.
#pragma unroll
  for (int off = 4; off < 32; off <<= 1) {
    l0 = __fadd_rn(l0, __shfl_xor_sync(0xffffffffu, l0, off));
    l1 = __fadd_rn(l1, __shfl_xor_sync(0xffffffffu, l1, off));
    if (v_q4) {
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        am[b][0] = __fadd_rn(am[b][0], __shfl_xor_sync(0xffffffffu, am[b][0], off));
        am[b][1] = __fadd_rn(am[b][1], __shfl_xor_sync(0xffffffffu, am[b][1], off));
      }
    }
  }
  float* s_ml = reinterpret_cast<float*>(smem);  // (kWarps, R, 2)
  float* s_acc = s_ml + kWarps * R * 2;          // (kWarps, R, HD)
  if (g == 0) {
    s_ml[(warp * R + 2 * t) * 2] = m0, s_ml[(warp * R + 2 * t) * 2 + 1] = l0;
    s_ml[(warp * R + 2 * t + 1) * 2] = m1, s_ml[(warp * R + 2 * t + 1) * 2 + 1] = l1;
  }
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    const float a0 = v_q4 ? am[b][0] : 0.0f, a1 = v_q4 ? am[b][1] : 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int d = b * 32 + 4 * g + 2 * j;
      float* r0 = s_acc + (warp * R + 2 * t) * HD;
      float* r1 = s_acc + (warp * R + 2 * t + 1) * HD;
      r0[d] = __fadd_rn(o[2 * b + j][0], a0);
      r1[d] = __fadd_rn(o[2 * b + j][1], a1);
      r0[d + 1] = __fadd_rn(o[2 * b + j][2], a0);
      r1[d + 1] = __fadd_rn(o[2 * b + j][3], a1);
    }
  }
  __syncthreads();
  const int64_t n_out_rows = int64_t(p.n_q) * p.n_head;
  for (int e = tid; e < R * HD; e += kThreads) {
    const int r = e / HD, d = e % HD;
    if (!row_live[r]) continue;
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, s_ml[(w * R + r) * 2]);
    float L = 0.0f, A = 0.0f;
    if (M != -INFINITY) {
      for (int w = 0; w < kWarps; ++w) {
        const float mw = s_ml[(w * R + r) * 2];
        if (mw == -INFINITY) continue;
        const float f = exp2f(mw - M);
        L = __fmaf_rn(f, s_ml[(w * R + r) * 2 + 1], L);
        A = __fmaf_rn(f, s_acc[(w * R + r) * HD + d], A);
      }
    }
    const int64_t orow = out_row(row0 + r);
    if (!p.split) {
      p.out[orow * HD + d] = L > 0.0f ? __fdiv_rn(A, L) : 0.0f;
    } else {
      const int64_t prow = int64_t(z) * n_out_rows + orow;
      p.part_acc[prow * HD + d] = A;
      if (d == 0) p.part_ml[prow * 2] = M, p.part_ml[prow * 2 + 1] = L;
    }
  }
}

// Merges the splits of one (query, head) row in order: out = sum_z w_z acc_z / sum_z w_z l_z,
// w_z = e^(m_z - M). Block: head_dim threads.
__global__ void decode_combine_kernel(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                                      int64_t n_rows, int n_splits, int head_dim, float* __restrict__ out) {
  const int64_t row = blockIdx.x;
  const int d = threadIdx.x;
  float M = -INFINITY;
  for (int z = 0; z < n_splits; ++z) M = fmaxf(M, part_ml[(z * n_rows + row) * 2]);
  float L = 0.0f, A = 0.0f;
  for (int z = 0; z < n_splits; ++z) {
    const float m = part_ml[(z * n_rows + row) * 2];
    if (m == -INFINITY) continue;
    const float w = exp2f(m - M);
    L = __fmaf_rn(w, part_ml[(z * n_rows + row) * 2 + 1], L);
    A = __fmaf_rn(w, part_acc[(z * n_rows + row) * head_dim + d], A);
  }
  out[row * head_dim + d] = L > 0.0f ? __fdiv_rn(A, L) : 0.0f;
}

// ---- host side ----

int fmt_of(GgmlType t) { return t == GgmlType::F16 ? kvq::kF16 : t == GgmlType::Q8_0 ? kvq::kQ8 : kvq::kQ4; }

// 16-byte units that hold a head slice of `bytes` starting anywhere in its first unit (f16 slices
// are always 16-byte aligned: rows of n_head_kv * head_dim halves, head_dim % 8 == 0).
int units_of(GgmlType t, int64_t bytes) {
  if (t == GgmlType::F16) return int(bytes / 16);
  // Slice start <= 14 (q8) / 12 (q4) bytes into its first unit.
  return int(t == GgmlType::Q8_0 ? (bytes + 14 + 15) / 16 : (bytes + 12 + 15) / 16);
}
// Bytes per key in a stage: a key stride that is a multiple of 128 bytes (f16 head_dim 64..256)
// would put the 8 keys of a fragment load on the same banks; 64 more spreads them.
int stride_of(int units) { return units * 16 + (units % 8 == 0 ? 64 : 0); }

// Splits a grid must hold for rows of a store: at most kDecodeTargetSplits, at most
// ceil(n / kDecodeMinChunk) for n visible keys, one more where a window's range starts unaligned.
int64_t grid_splits(int64_t max_visible, bool windowed) {
  const int64_t n = std::max<int64_t>(max_visible, 1);
  return std::min(kDecodeTargetSplits, (n + kDecodeMinChunk - 1) / kDecodeMinChunk) + (windowed ? 1 : 0);
}

template <int HD, int KF, int VF>
Status launch_fmt(const DecParams& p, dim3 grid, cudaStream_t st) {
  const int stage_bytes = TK * (p.k_stride + p.v_stride);
  const size_t smem = Smem<HD>::ring(p.stages, stage_bytes) + Smem<HD>::q_frag;
  STRATA_TRY(detail::cuda_status(cudaFuncSetAttribute(decode_attention_kernel<HD, KF, VF>,
                                                      cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                                 "decode attention: cudaFuncSetAttribute"));
  decode_attention_kernel<HD, KF, VF><<<grid, kThreads, smem, st>>>(p);
  return detail::launch_status("decode attention");
}

// Same-type pairs get their decoders fixed at compile time; mixed pairs switch per key.
template <int HD>
Status launch(const DecParams& p, dim3 grid, cudaStream_t st) {
  if (p.k_fmt == p.v_fmt) {
    switch (p.k_fmt) {
      case kvq::kF16: return launch_fmt<HD, kvq::kF16, kvq::kF16>(p, grid, st);
      case kvq::kQ8: return launch_fmt<HD, kvq::kQ8, kvq::kQ8>(p, grid, st);
      default: return launch_fmt<HD, kvq::kQ4, kvq::kQ4>(p, grid, st);
    }
  }
  return launch_fmt<HD, -1, -1>(p, grid, st);
}

int64_t store_splits(const KvStoreDev& kv, const AttentionShapeDev& s) {
  const int64_t max_visible = s.window > 0 ? std::min(s.window, kv.capacity) : kv.capacity;
  return grid_splits(max_visible, s.window > 0);
}

}  // namespace

int64_t decode_attention_splits(const KvStoreDev& kv, const AttentionShapeDev& s) { return store_splits(kv, s); }

// Which kernel a KV format pair takes: fixed per process (rows of a verify pass must equal decode
// steps, so every call with the same formats takes the same kernel). STRATA_DECODE_ATTENTION=simt
// or =tc forces one for every format (benchmarks, A/B runs); unset, the measured faster one.
bool decode_attention_uses_simt(GgmlType k, GgmlType v) {
  static const int forced = [] {
    const char* e = std::getenv("STRATA_DECODE_ATTENTION");
    if (e && std::strcmp(e, "simt") == 0) return 1;
    if (e && std::strcmp(e, "tc") == 0) return 0;
    return -1;
  }();
  if (forced >= 0) return forced == 1;
  // H200, bench kernels (1 query, 16 KV heads x 128, 32K / 128K keys): q8_0 tensor cores 107 / 368
  // us against SIMT 110 / 382; q4_1 96 / 315 against 93 / 314; f16 164 / 571 against 109 / 378.
  return !(k == GgmlType::Q8_0 && v == GgmlType::Q8_0);
}

bool decode_attention_split_fits(int64_t n_q, const KvStoreDev& kv, const AttentionShapeDev& s, Workspace ws) {
  const int64_t splits = store_splits(kv, s);
  const size_t per_split = size_t(n_q * s.n_head) * size_t(s.head_dim + 2) * sizeof(float);
  return splits == 1 || (ws.d_ptr != nullptr && ws.bytes >= size_t(splits) * per_split);
}

bool decode_attention_applies(int64_t n_q, int64_t head_dim, GgmlType k, GgmlType v) {
  auto ok = [](GgmlType t) { return t == GgmlType::F16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_1; };
  return n_q >= 1 && n_q <= kDecodeMaxQueries && ok(k) && ok(v) &&
         (head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256);
}

size_t decode_attention_workspace_bytes(int64_t n_q, const AttentionShapeDev& s, int64_t max_keys) {
  const int64_t nq = std::min(n_q, kDecodeMaxQueries);
  if (nq <= 0 || s.n_head <= 0 || s.head_dim <= 0) return 0;
  // Windowed or not: the engine sizes one workspace for all layers with window 0.
  const int64_t z = grid_splits(max_keys, true);
  return size_t(z) * size_t(nq * s.n_head) * size_t(s.head_dim + 2) * sizeof(float);
}

Status decode_attention(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                        const AttentionShapeDev& s, float* d_out, Workspace ws, cudaStream_t st,
                        const TreeMaskDev* tree) {
  if (kv.capacity > 0x7fffffff || n_q * s.n_head > 0x7fffffff)
    return Status::error("decode attention: capacity {} or rows {} too large", kv.capacity, n_q * s.n_head);
  if (decode_attention_uses_simt(kv.k_dtype, kv.v_dtype))
    return decode_attention_simt(d_q, d_pos, n_q, kv, s, d_out, ws, st, tree);
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
  p.k_stride = stride_of(p.k_units);
  p.v_stride = stride_of(p.v_units);
  // Stages: as many as fit kStageBudget, 2..kMaxStages (f16 at head_dim 128: 2 x 40 KB; q8 / q4:
  // 4 x ~12 KB). One stage in flight per block is ~10 KB of reads per SM per microsecond or more.
  const int stage_bytes = TK * (p.k_stride + p.v_stride);
  p.stages = std::clamp(kStageBudget / stage_bytes, 2, kMaxStages);
  p.out = d_out;
  p.n_q = int(n_q);
  p.n_head = int(s.n_head);
  p.group = int(s.n_head / s.n_head_kv);
  p.capacity = int(kv.capacity);
  p.window = int(std::min<int64_t>(s.window, 0x7fffffff));
  p.scale_log2 = s.scale * 1.4426950408889634f;
  if (tree && tree->d_bits) p.tree_bits = tree->d_bits, p.tree_first = tree->first;

  // Splits: fixed by the store and the window (never by n_q), as far as the workspace holds them.
  const int64_t splits = decode_attention_split_fits(n_q, kv, s, ws) ? store_splits(kv, s) : 1;
  p.split = splits > 1;
  if (p.split) {
    p.part_acc = static_cast<float*>(ws.d_ptr);
    p.part_ml = p.part_acc + size_t(splits) * size_t(n_q * s.n_head) * size_t(s.head_dim);
  }
  const int64_t rows = n_q * p.group;
  const int64_t tiles = (rows + R - 1) / R;
  if (s.n_head_kv > 65535) return Status::error("decode attention: {} KV heads: grid too large", s.n_head_kv);
  const dim3 grid(unsigned(tiles), unsigned(s.n_head_kv), unsigned(splits));
  auto run = [&]() -> Status {
    switch (s.head_dim) {
      case 32: return launch<32>(p, grid, st);
      case 64: return launch<64>(p, grid, st);
      case 128: return launch<128>(p, grid, st);
      case 256: return launch<256>(p, grid, st);
      default: return Status::error("decode attention: head_dim {} unsupported", s.head_dim);
    }
  };
  if (Status status = run(); !status || !p.split) return status;
  decode_combine_kernel<<<unsigned(n_q * s.n_head), unsigned(s.head_dim), 0, st>>>(
      p.part_acc, p.part_ml, n_q * s.n_head, int(splits), int(s.head_dim), d_out);
  return detail::launch_status("decode attention (combine)");
}

}  // namespace strata::kernels::cuda
