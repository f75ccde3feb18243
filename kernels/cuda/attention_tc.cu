// Tensor-core attention for prefill chunks (FlashAttention-2 style), head_dim 64 or 128, over K and
// V each f16, q8_0 or q4_1 (kv_quant.cuh), or both f32. Quantised and f32 blocks are decoded to f16
// as a tile enters shared memory (never into a copy of the store).
// Same semantics and KV layout as attention.cu (kernels/cpu/attention.h): causal, optional sliding
// window, grouped KV heads, position p in slot p % capacity.
//
// Why a second kernel: the SIMT kernel computes scores and P.V in f32 FMAs (~10 TFLOP/s on an
// H200), the bulk of a long prefill chunk's time at 32K+ keys. Here Q.K^T and P.V run on tensor
// cores (mma.sync m16n8k16, f16 in, f32 accumulate; sm_80+, so the RTX 3060 too).
//
// Block: one KV head g and BM = 64 consecutive "rows" (row r = query r / group, head
// g * group + r % group, as in attention.cu), 4 warps of 16 rows. It walks the keys its rows can
// see in tiles of BN = 64 keys. Per warp, everything per row stays in registers (FA2): Q as mma A
// fragments, the 16 x 64 scores S, the running max m and sum l (f32), P (S's accumulator layout is
// the A layout of the P.V mma, so P never touches shared memory) and the 16 x head_dim output O.
// K and V tiles are double-buffered in shared memory (f16, rows padded by 16 bytes so that
// ldmatrix reads are conflict-free): while tile t is used, tile t + 1 is on its way:
//   - f16: cp.async straight into the other buffer;
//   - q8_0 / q4_1 / f32: loaded into registers (kvq::fetch_unit units of 8 values) before the
//     tile-t mma work that hides the load, decoded to f16 and stored after it (K after Q.K^T,
//     V's load issued then and stored after P.V, so at most one tensor's units are live).
// One __syncthreads per tile. A warp skips the mma work of a tile that none of its rows sees, and
// the mask of a tile that all of its rows see whole.
//
// Precision: Q, P and the decoded K/V are rounded to f16 before their products (q8_0 q*d and
// q4_1 q*d+m round once, as one f16 operation): about 1e-3 relative on the output, against ~1e-6
// for the f32 kernel. It is used only for chunks of at least kTcMinQueries (65) queries, so decode
// and speculative verification (<= 64 tokens) keep an f32 kernel and its results.
//
// Measured (H200, `strata bench kernels`, 27B global layer: 32 heads, 16 KV heads x 128, chunks of
// 512 / 2048 queries ending at 32K / 128K keys): f16 KV ~200 TFLOP/s (23% of the bf16 GEMM rate),
// q4_1 ~176 (20%), q8_0 ~60 (7%); the tiled f32 kernel 8.5-10 (1%). What limits it (ncu, f16 and
// q4 at 128K): neither memory (L2 36% / 7% busy, DRAM < 5%) nor the tensor pipe, but issue and
// latency: ~240 registers allow 8 warps per SM (2 per scheduler), IPC 1.7-2.0, stalls mostly on
// fixed-latency dependencies (the serial max / sum chains of the softmax, unfused scale-and-
// subtract before exp2). q8_0 is likely held back by its 2-byte loads (kvq::fetch_unit: 5 per unit
// of 8 values, against 2 for q4_1); not profiled yet.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/kv_quant.cuh"

namespace strata::kernels::cuda {
namespace {

constexpr int BM = 64, BN = 64;  // rows per block (one warp per 16), keys per tile
constexpr int kWarps = BM / 16, kThreads = 32 * kWarps;
constexpr int kPad = 8;  // halves of padding per shared row: 16 bytes, rows land on distinct banks

template <int HD>
struct Tile {
  static constexpr int ld = HD + kPad;                   // halves per shared row
  static constexpr int halves = BN * ld;                 // one K or V tile
  static constexpr int kPerKey = HD / 8;                 // units of 8 values per key row
  static constexpr int kPer = BN * kPerKey / kThreads;   // units per thread per tile
  static constexpr int kKeyStride = kThreads / kPerKey;  // keys between a thread's units
  // Buffers 0 and 1, each K then V (Q, BM rows, aliases buffer 1 before the loop), then the warps'
  // key ranges: 68 KiB at HD 128, two blocks per SM on an H200 (one on an RTX 3060, 100 KiB).
  static constexpr size_t smem = size_t(4) * halves * 2 + kWarps * 2 * sizeof(int);
  static_assert(BM <= 2 * BN, "Q aliases one buffer");
  static_assert(BN * kPerKey % kThreads == 0 && kThreads % kPerKey == 0);
};

// ---- PTX wrappers (sm_80+) ----------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const half* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const half* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// c += a * b: a 16x16 (row), b 16x8 (col), f16 in, f32 accumulate.
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// 16 bytes global -> shared; src_bytes 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(half* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// 2^x on the special-function unit (exp2f adds subnormal handling): relative error ~2^-22, 2^-inf = 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ __half2 as_half2(uint32_t u) { return *reinterpret_cast<const __half2*>(&u); }
__device__ __forceinline__ uint32_t as_u32(__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); }

// ---- K/V tiles ----------------------------------------------------------------------------------

// Slots of the keys this thread loads in the tile at j0 (key j0 + tid / kPerKey + i * kKeyStride),
// -1 past b_hi (those rows are zero-filled: finite, and masked anyway). One division per tile.
template <int HD>
__device__ __forceinline__ void tile_slots(int j0, int b_hi, int cap, int (&slot)[Tile<HD>::kPer]) {
  using T = Tile<HD>;
  const int j = j0 + int(threadIdx.x) / T::kPerKey;
  int s = int(unsigned(j) % unsigned(cap));
#pragma unroll
  for (int i = 0; i < T::kPer; ++i) {
    slot[i] = j + i * T::kKeyStride <= b_hi ? s : -1;
    s += T::kKeyStride;
    while (s >= cap) s -= cap;
  }
}

// f16 tile: cp.async into dst (BN rows of ld halves). base: the head's slice in slot 0.
template <int HD>
__device__ __forceinline__ void tile_async_f16(const uint8_t* base, int64_t row_bytes, int j0, int b_hi, int cap,
                                               half* dst) {
  using T = Tile<HD>;
  int slot[T::kPer];
  tile_slots<HD>(j0, b_hi, cap, slot);
  const int u = int(threadIdx.x) % T::kPerKey, kk0 = int(threadIdx.x) / T::kPerKey;
#pragma unroll
  for (int i = 0; i < T::kPer; ++i) {
    const uint8_t* src = slot[i] >= 0 ? base + int64_t(slot[i]) * row_bytes + u * 16 : base;
    cp_async16(dst + (kk0 + i * T::kKeyStride) * T::ld + u * 8, src, slot[i] >= 0 ? 16 : 0);
  }
}

// Register-staged formats (f32, q8, q4): raw units now, decoded f16 later.
template <int HD, int F>
__device__ __forceinline__ void tile_fetch(const uint8_t* base, int64_t row_bytes, int j0, int b_hi, int cap,
                                           uint4 (&raw)[Tile<HD>::kPer]) {
  using T = Tile<HD>;
  int slot[T::kPer];
  tile_slots<HD>(j0, b_hi, cap, slot);
  const int u = int(threadIdx.x) % T::kPerKey;
#pragma unroll
  for (int i = 0; i < T::kPer; ++i) {
    raw[i] = make_uint4(0, 0, 0, 0);  // decodes to zeros in every format
    if (slot[i] < 0) continue;
    const uint8_t* row = base + int64_t(slot[i]) * row_bytes;
    if constexpr (F == kvq::kF32) {  // 8 floats, rounded to f16 now (the load is not hidden: f32 KV is for tests)
      const float4 a = __ldg(reinterpret_cast<const float4*>(row) + 2 * u);
      const float4 b = __ldg(reinterpret_cast<const float4*>(row) + 2 * u + 1);
      raw[i] = make_uint4(pack_half2(a.x, a.y), pack_half2(a.z, a.w), pack_half2(b.x, b.y), pack_half2(b.z, b.w));
    } else {
      raw[i] = kvq::fetch_unit<F>(row, u);
    }
  }
}

// Codes as exact f16 integers: byte b of x becomes the half 1024 + b (0x64bb).
__device__ __forceinline__ uint32_t bytes01_to_half2(uint32_t x) { return __byte_perm(x, 0x64646464u, 0x4140); }
__device__ __forceinline__ uint32_t bytes23_to_half2(uint32_t x) { return __byte_perm(x, 0x64646464u, 0x4342); }

template <int HD, int F>
__device__ __forceinline__ void tile_store(const uint4 (&raw)[Tile<HD>::kPer], half* dst) {
  using T = Tile<HD>;
  const int u = int(threadIdx.x) % T::kPerKey, kk0 = int(threadIdx.x) / T::kPerKey;
#pragma unroll
  for (int i = 0; i < T::kPer; ++i) {
    half* row = dst + (kk0 + i * T::kKeyStride) * T::ld;
    if constexpr (F == kvq::kF32) {
      *reinterpret_cast<uint4*>(row + u * 8) = raw[i];
    } else if constexpr (F == kvq::kQ8) {
      // raw = {d, codes 0-3, codes 4-7}: q + 128 as 1152 + q, minus 1152 (exact), times d (one rounding).
      const __half2 d2 = __half2half2(__ushort_as_half(uint16_t(raw[i].x & 0xffffu)));
      const __half2 bias = __float2half2_rn(1152.0f);
      const uint32_t y = raw[i].y ^ 0x80808080u, z = raw[i].z ^ 0x80808080u;
      const uint4 h = make_uint4(as_u32(__hmul2(__hsub2(as_half2(bytes01_to_half2(y)), bias), d2)),
                                 as_u32(__hmul2(__hsub2(as_half2(bytes23_to_half2(y)), bias), d2)),
                                 as_u32(__hmul2(__hsub2(as_half2(bytes01_to_half2(z)), bias), d2)),
                                 as_u32(__hmul2(__hsub2(as_half2(bytes23_to_half2(z)), bias), d2)));
      *reinterpret_cast<uint4*>(row + (u >> 2) * kvq::kGroup + (u & 3) * 8) = h;
    } else {
      static_assert(F == kvq::kQ4);
      // raw = {d | m << 16, 4 code bytes}: low nibbles are values 4(u%4) + i of the group, high
      // nibbles 16 + 4(u%4) + i; value = q * d + m (one rounding: fma).
      const __half2 d2 = __half2half2(__ushort_as_half(uint16_t(raw[i].x & 0xffffu)));
      const __half2 m2 = __half2half2(__ushort_as_half(uint16_t(raw[i].x >> 16)));
      const __half2 bias = __float2half2_rn(1024.0f);
      const uint32_t lo = raw[i].y & 0x0f0f0f0fu, hi = (raw[i].y >> 4) & 0x0f0f0f0fu;
      const uint2 l = make_uint2(as_u32(__hfma2(__hsub2(as_half2(bytes01_to_half2(lo)), bias), d2, m2)),
                                 as_u32(__hfma2(__hsub2(as_half2(bytes23_to_half2(lo)), bias), d2, m2)));
      const uint2 h = make_uint2(as_u32(__hfma2(__hsub2(as_half2(bytes01_to_half2(hi)), bias), d2, m2)),
                                 as_u32(__hfma2(__hsub2(as_half2(bytes23_to_half2(hi)), bias), d2, m2)));
      half* o = row + (u >> 2) * kvq::kGroup + (u & 3) * 4;
      *reinterpret_cast<uint2*>(o) = l;
      *reinterpret_cast<uint2*>(o + 16) = h;
    }
  }
}

// ---- the kernel ---------------------------------------------------------------------------------

// Grid: (row tiles of BM, n_head_kv). KF, VF: kvq::Fmt of K and V (both kF32, or each of kF16,
// kQ8, kQ4). Registers: ~240 at HD 128 (no spills), so 2 blocks (8 warps) per SM.
template <int HD, int KF, int VF>
__global__ void __launch_bounds__(kThreads, 2) attention_tc_kernel(TcAttnParams prm) {
  using T = Tile<HD>;
  constexpr int LD = T::ld;
  extern __shared__ __align__(16) unsigned char smem[];
  // Buffer b: K at smem + 2b tiles, V at 2b + 1 (f16, [BN][LD] each).
  half* const buf0 = reinterpret_cast<half*>(smem);
  half* Qs = buf0 + 2 * T::halves;  // [BM][LD], aliases buffer 1 until the loop starts
  int* w_range = reinterpret_cast<int*>(buf0 + 4 * T::halves);  // [kWarps][2]: lo, hi

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = blockIdx.y;
  const int64_t n_rows = prm.n_q * prm.group;
  const int64_t row0 = int64_t(blockIdx.x) * BM;
  const int cap = int(prm.capacity < 0x7fffffff ? prm.capacity : 0x7fffffff);  // positions are int32

  // This thread's two rows (accumulator layout: lane / 4 and lane / 4 + 8 of the warp's 16).
  int pos_r[2], lo_r[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t r = row0 + warp * 16 + lane / 4 + 8 * i;
    if (r < n_rows) {
      pos_r[i] = prm.pos[r / prm.group];
      lo_r[i] = prm.window > 0 ? int(max(int64_t(pos_r[i]) - prm.window + 1, int64_t(0))) : 0;
    } else {
      pos_r[i] = -1;  // no keys
      lo_r[i] = 0x7fffffff;
    }
  }
  // The warp's key range [w_lo, w_hi], and the part every row sees [w_lo_all, w_hi_all].
  int w_lo = min(lo_r[0], lo_r[1]), w_hi = max(pos_r[0], pos_r[1]);
  int w_lo_all = max(lo_r[0], lo_r[1]), w_hi_all = min(pos_r[0], pos_r[1]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    w_lo = min(w_lo, __shfl_xor_sync(0xffffffffu, w_lo, off));
    w_hi = max(w_hi, __shfl_xor_sync(0xffffffffu, w_hi, off));
    w_lo_all = max(w_lo_all, __shfl_xor_sync(0xffffffffu, w_lo_all, off));
    w_hi_all = min(w_hi_all, __shfl_xor_sync(0xffffffffu, w_hi_all, off));
  }
  if (lane == 0) {
    w_range[2 * warp] = w_lo;
    w_range[2 * warp + 1] = w_hi;
  }
  // Q, rounded to f16.
  for (int e = tid; e < BM * HD / 2; e += kThreads) {
    const int r = e / (HD / 2), d = 2 * (e % (HD / 2));
    const int64_t gr = row0 + r;
    float2 qv = make_float2(0.0f, 0.0f);
    if (gr < n_rows) {
      const int64_t qi = gr / prm.group, h = int64_t(g) * prm.group + gr % prm.group;
      const float* qr = prm.q + (qi * prm.n_head + h) * HD + d;
      qv = make_float2(qr[0], qr[1]);
    }
    *reinterpret_cast<uint32_t*>(Qs + r * LD + d) = pack_half2(qv.x, qv.y);
  }
  __syncthreads();
  int b_lo = 0x7fffffff, b_hi = -1;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) b_lo = min(b_lo, w_range[2 * w]), b_hi = max(b_hi, w_range[2 * w + 1]);

  // Q fragments (A operand): matrices (rows 0-7 | 8-15) x (dims lo | hi) of each 16-dim step.
  uint32_t qf[HD / 16][4];
#pragma unroll
  for (int kd = 0; kd < HD / 16; ++kd)
    ldsm_x4(qf[kd], Qs + (warp * 16 + ((lane / 8) % 2) * 8 + lane % 8) * LD + kd * 16 + (lane / 16) * 8);

  const uint8_t* Kg = prm.k + int64_t(g) * prm.k_head_bytes;
  const uint8_t* Vg = prm.v + int64_t(g) * prm.v_head_bytes;
  uint4 raw[T::kPer];

  // Tile b_lo into buffer 0 (buffer 1, where Q is, is first written after the barrier below).
  if (b_lo <= b_hi) {
    if constexpr (KF == kvq::kF16) {
      tile_async_f16<HD>(Kg, prm.k_row_bytes, b_lo, b_hi, cap, buf0);
    } else {
      tile_fetch<HD, KF>(Kg, prm.k_row_bytes, b_lo, b_hi, cap, raw);
      tile_store<HD, KF>(raw, buf0);
    }
    if constexpr (VF == kvq::kF16) {
      tile_async_f16<HD>(Vg, prm.v_row_bytes, b_lo, b_hi, cap, buf0 + T::halves);
    } else {
      tile_fetch<HD, VF>(Vg, prm.v_row_bytes, b_lo, b_hi, cap, raw);
      tile_store<HD, VF>(raw, buf0 + T::halves);
    }
    cp_async_commit();
    cp_async_wait_all();
  }
  __syncthreads();

  float o[HD / 8][4];  // output accumulators: (row lane/4 | +8) x (dims 8 dt + 2 (lane % 4) + {0, 1})
#pragma unroll
  for (int dt = 0; dt < HD / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.0f, 0.0f};  // l: this thread's part of the row sum
  const float scale_log2 = prm.scale * 1.4426950408889634f;        // exp(x) = exp2(x log2 e)

  int buf = 0;
  for (int j0 = b_lo; j0 <= b_hi; j0 += BN, buf ^= 1) {
    const bool next = j0 + BN <= b_hi;
    const half* Kt = buf0 + 2 * buf * T::halves;
    const half* Vt = Kt + T::halves;
    half* Kn = buf0 + 2 * (buf ^ 1) * T::halves;
    half* Vn = Kn + T::halves;
    if (next) {
      if constexpr (KF == kvq::kF16) tile_async_f16<HD>(Kg, prm.k_row_bytes, j0 + BN, b_hi, cap, Kn);
      else tile_fetch<HD, KF>(Kg, prm.k_row_bytes, j0 + BN, b_hi, cap, raw);
      if constexpr (VF == kvq::kF16) tile_async_f16<HD>(Vg, prm.v_row_bytes, j0 + BN, b_hi, cap, Vn);
      cp_async_commit();
    }
    const bool active = j0 <= w_hi && j0 + BN - 1 >= w_lo;       // some row of this warp sees the tile
    const bool whole = j0 >= w_lo_all && j0 + BN - 1 <= w_hi_all;  // every row sees all of it

    float s[BN / 8][4];
    if (active) {
      // S = Q K^T: K tile rows are keys (dims contiguous) = the col-major B operand.
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kd = 0; kd < HD / 16; ++kd) {
#pragma unroll
        for (int np = 0; np < BN / 16; ++np) {
          uint32_t b[4];  // (keys 0-7 | 8-15 of the pair) x (dims lo | hi)
          ldsm_x4(b, Kt + (np * 16 + (lane / 16) * 8 + lane % 8) * LD + kd * 16 + ((lane / 8) % 2) * 8);
          mma16816(s[2 * np], qf[kd], b[0], b[1]);
          mma16816(s[2 * np + 1], qf[kd], b[2], b[3]);
        }
      }
    }
    if (next) {
      if constexpr (KF != kvq::kF16) tile_store<HD, KF>(raw, Kn);
      if constexpr (VF != kvq::kF16) tile_fetch<HD, VF>(Vg, prm.v_row_bytes, j0 + BN, b_hi, cap, raw);
    }
    if (active) {
      // Online softmax in the log2 domain; masked keys get -inf, so probability exactly 0.
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[n][e] * scale_log2;
          if (!whole) {
            const int j = j0 + n * 8 + (lane % 4) * 2 + (e & 1), i = e >> 1;
            if (j > pos_r[i] || j < lo_r[i]) x = -INFINITY;
          }
          s[n][e] = x;
          mx[e >> 1] = fmaxf(mx[e >> 1], x);
        }
      }
      float alpha[2], m_use[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
        const float m_new = fmaxf(m_r[i], mx[i]);
        m_use[i] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet: p = 0, not NaN
        alpha[i] = fast_exp2(m_r[i] - m_use[i]);      // 0 while m_r is -inf
        m_r[i] = m_new;
        l_r[i] *= alpha[i];
      }
      if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {  // the max moved for some row
#pragma unroll
        for (int dt = 0; dt < HD / 8; ++dt) {
          o[dt][0] *= alpha[0], o[dt][1] *= alpha[0];
          o[dt][2] *= alpha[1], o[dt][3] *= alpha[1];
        }
      }
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[n][e] = fast_exp2(s[n][e] - m_use[e >> 1]);
          l_r[e >> 1] += s[n][e];
        }
      }
      // O += P V: P's A fragments are S's accumulators (f16); V rows are keys = the row-major B
      // operand, read transposed by ldmatrix.
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        const uint32_t pa[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                                pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dp = 0; dp < HD / 16; ++dp) {
          uint32_t b[4];  // (keys lo | hi) x (dims 0-7 | 8-15 of the pair)
          ldsm_x4_trans(b, Vt + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * LD + dp * 16 + (lane / 16) * 8);
          mma16816(o[2 * dp], pa, b[0], b[1]);
          mma16816(o[2 * dp + 1], pa, b[2], b[3]);
        }
      }
    }
    if (next) {
      if constexpr (VF != kvq::kF16) tile_store<HD, VF>(raw, Vn);
      cp_async_wait_all();
    }
    __syncthreads();  // tile t + 1 complete; every warp is done with tile t's buffers
  }

  // Output: O / l, l summed over the 4 lanes that share a row.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float l = l_r[i];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int64_t gr = row0 + warp * 16 + lane / 4 + 8 * i;
    if (gr >= n_rows) continue;
    const int64_t qi = gr / prm.group, h = int64_t(g) * prm.group + gr % prm.group;
    float* out = prm.out + (qi * prm.n_head + h) * HD + (lane % 4) * 2;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int dt = 0; dt < HD / 8; ++dt)
      *reinterpret_cast<float2*>(out + dt * 8) = make_float2(o[dt][2 * i] * inv, o[dt][2 * i + 1] * inv);
  }
}

template <int HD, int KF, int VF>
Status launch(const TcAttnParams& p, cudaStream_t st) {
  constexpr size_t smem = Tile<HD>::smem;
  const cudaError_t err =
      cudaFuncSetAttribute(attention_tc_kernel<HD, KF, VF>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  STRATA_TRY(detail::cuda_status(err, "attention (tensor cores): cudaFuncSetAttribute"));
  const int64_t tiles = (p.n_q * p.group + BM - 1) / BM;
  if (tiles > 0x7fffffff || p.n_head_kv > 65535) return Status::error("attention (tensor cores): grid too large");
  attention_tc_kernel<HD, KF, VF><<<dim3(unsigned(tiles), unsigned(p.n_head_kv)), kThreads, smem, st>>>(p);
  return detail::launch_status("attention (tensor cores)");
}

int tc_fmt(GgmlType t) {
  switch (t) {
    case GgmlType::F16: return kvq::kF16;
    case GgmlType::Q8_0: return kvq::kQ8;
    case GgmlType::Q4_1: return kvq::kQ4;
    case GgmlType::F32: return kvq::kF32;
    default: return -1;
  }
}

template <int HD, int KF>
Status launch_v(const TcAttnParams& p, int vf, cudaStream_t st) {
  switch (vf) {
    case kvq::kF16: return launch<HD, KF, kvq::kF16>(p, st);
    case kvq::kQ8: return launch<HD, KF, kvq::kQ8>(p, st);
    default: return launch<HD, KF, kvq::kQ4>(p, st);
  }
}

template <int HD>
Status launch_kv(const TcAttnParams& p, int kf, int vf, cudaStream_t st) {
  switch (kf) {
    case kvq::kF32: return launch<HD, kvq::kF32, kvq::kF32>(p, st);
    case kvq::kF16: return launch_v<HD, kvq::kF16>(p, vf, st);
    case kvq::kQ8: return launch_v<HD, kvq::kQ8>(p, vf, st);
    default: return launch_v<HD, kvq::kQ4>(p, vf, st);
  }
}

}  // namespace

bool attention_tc_applies(int64_t n_q, int64_t head_dim, GgmlType k, GgmlType v) {
  if (n_q < kTcMinQueries || (head_dim != 64 && head_dim != 128)) return false;
  const int kf = tc_fmt(k), vf = tc_fmt(v);
  if (kf < 0 || vf < 0) return false;
  return (kf == kvq::kF32) == (vf == kvq::kF32);  // f32 with f32 only
}

Status attention_tc(const TcAttnParams& p, int64_t head_dim, GgmlType k, GgmlType v, cudaStream_t st) {
  if (!attention_tc_applies(p.n_q, head_dim, k, v))
    return Status::error("attention (tensor cores): head_dim {} with K {} and V {} unsupported", head_dim,
                         ggml_type_info(k).name, ggml_type_info(v).name);
  const int kf = tc_fmt(k), vf = tc_fmt(v);
  return head_dim == 64 ? launch_kv<64>(p, kf, vf, st) : launch_kv<128>(p, kf, vf, st);
}

}  // namespace strata::kernels::cuda
