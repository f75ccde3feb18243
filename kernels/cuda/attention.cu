// Causal / sliding-window attention over a KV store of `capacity` slots (position p in slot
// p % capacity), grouped KV heads; semantics of kernels/cpu/attention.h. KV formats: f32 (K and V
// both), or f16 / Q8_0 / Q4_1 chosen per tensor (kv_quant.cuh decodes them).
//
// attention() dispatches: 1..64 queries over f16 / Q8_0 / Q4_1 KV (head_dim 32/64/128/256) go to
// the flash-decoding kernel (attention_decode.cu); longer chunks (>= kTcMinQueries) with head_dim
// 64 or 128 over any KV type to the tensor-core kernel (attention_tc.cu); the rest (f32 KV under 65
// queries, chunks of head_dim 32/48/96/256) to the tiled SIMT kernel of this file. kv_write is in
// attention_kv_write.cu.
//
// The tiled kernel: for one KV head g, the "rows" are the
// (query, head) pairs whose head maps to g: row r = query r / group, head g * group + r % group.
// A block takes R consecutive rows and walks a range of keys in tiles of TK: it loads the K and V
// tile once into shared memory (decoded to f32: quantised KV is dequantised per tile, in registers
// on its way to shared memory, never into a copy of the store) and uses it for all its rows, so K/V are read
// once per group (and once per query batch in decode). Per row it keeps the running max m, the
// running sum l and the unnormalised output acc (the online softmax).
//
// Flash-decoding: the key range of a block's rows is split into n_splits contiguous chunks, one
// block each (blockIdx.z), so a long context fills the GPU even with one query. With n_splits > 1
// each block writes (acc, m, l) to the workspace and a combine kernel merges the splits; with
// n_splits == 1 the block writes acc / l directly. Key ranges depend on positions that live on the
// device, so each block derives its own range from its rows' positions (no host sync: the whole
// call is graph-capturable).
//
// Masked keys inside a block's range (another row's keys) get probability exactly 0; the entries
// they read must be finite (the store holds written data there, the caller's contract as on the CPU).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/act_round.h"
#include "kernels/cuda/attention_decode.h"
#include "kernels/cuda/attention_tree.h"
#include "kernels/cuda/attention_internal.h"
#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/kv_quant.cuh"

namespace strata::kernels::cuda {
namespace {

using detail::check_kv;
using detail::launch_status;

constexpr int kThreads = 128;
constexpr int kMaxSplits = 64;
constexpr int64_t kMinKeysPerSplit = 256;

cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

struct AttnParams {
  const float* q;
  const int32_t* pos;
  const uint8_t* k;
  const uint8_t* v;
  int64_t k_row_bytes, v_row_bytes;    // bytes per slot
  int64_t k_head_bytes, v_head_bytes;  // bytes of one head's slice of a slot
  int k_fmt, v_fmt;                    // kvq::Fmt
  float* out;
  float* part_acc;  // (n_splits, n_q * n_head, head_dim), when n_splits > 1
  float* part_ml;   // (n_splits, n_q * n_head, 2): m, l
  int64_t n_q, n_head, n_head_kv, capacity, window;
  int group, n_splits;
  float scale;
};

template <int HD>
constexpr int tile_keys() {
  return HD <= 128 ? 64 : 32;
}

// ---- tile loads: all of a tile's 16-byte units are loaded before any is converted ----

// f32 K and V: units of 4 values.
template <int HD, int TK>
__device__ __forceinline__ void load_tile_f32(const AttnParams& p, int t0, int b_hi, int g, float* Ks, float* Vs) {
  constexpr int KP = HD + 1, kPerKey = HD / 4, kUnits = TK * kPerKey, kPer = (kUnits + kThreads - 1) / kThreads;
  const uint8_t* K = p.k + int64_t(g) * p.k_head_bytes;
  const uint8_t* V = p.v + int64_t(g) * p.v_head_bytes;
  uint4 kraw[kPer], vraw[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int v = threadIdx.x + i * kThreads, kk = v / kPerKey, c = v % kPerKey, j = t0 + kk;
    kraw[i] = vraw[i] = make_uint4(0, 0, 0, 0);
    if (v < kUnits && j <= b_hi) {
      const int64_t slot = int64_t(j) % p.capacity;
      kraw[i] = *reinterpret_cast<const uint4*>(K + slot * p.k_row_bytes + c * 16);
      vraw[i] = *reinterpret_cast<const uint4*>(V + slot * p.v_row_bytes + c * 16);
    }
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int v = threadIdx.x + i * kThreads, kk = v / kPerKey, c = v % kPerKey;
    if (v >= kUnits) continue;
    float* ko = Ks + kk * KP + c * 4;
    float* vo = Vs + kk * HD + c * 4;
    ko[0] = __uint_as_float(kraw[i].x), ko[1] = __uint_as_float(kraw[i].y);
    ko[2] = __uint_as_float(kraw[i].z), ko[3] = __uint_as_float(kraw[i].w);
    vo[0] = __uint_as_float(vraw[i].x), vo[1] = __uint_as_float(vraw[i].y);
    vo[2] = __uint_as_float(vraw[i].z), vo[3] = __uint_as_float(vraw[i].w);
  }
}

// f16 / q8 / q4 (per tensor): units of 8 values (kvq::fetch_unit).
template <int HD, int TK>
constexpr int units8_per_thread() {
  return (TK * (HD / 8) + kThreads - 1) / kThreads;
}

template <int HD, int TK, int F>
__device__ __forceinline__ void fetch_tile(const uint8_t* base, int64_t row_bytes, int64_t capacity, int t0, int b_hi,
                                           uint4 (&raw)[units8_per_thread<HD, TK>()]) {
  constexpr int kPerKey = HD / 8, kUnits = TK * kPerKey;
#pragma unroll
  for (int i = 0; i < units8_per_thread<HD, TK>(); ++i) {
    const int v = threadIdx.x + i * kThreads, kk = v / kPerKey, u = v % kPerKey, j = t0 + kk;
    raw[i] = make_uint4(0, 0, 0, 0);  // beyond the range: decodes to zeros (finite; masked anyway)
    if (v < kUnits && j <= b_hi) raw[i] = kvq::fetch_unit<F>(base + (int64_t(j) % capacity) * row_bytes, u);
  }
}

template <int HD, int TK, int F>
__device__ __forceinline__ void store_tile(const uint4 (&raw)[units8_per_thread<HD, TK>()], float* S, int stride) {
  constexpr int kPerKey = HD / 8, kUnits = TK * kPerKey;
#pragma unroll
  for (int i = 0; i < units8_per_thread<HD, TK>(); ++i) {
    const int v = threadIdx.x + i * kThreads, kk = v / kPerKey, u = v % kPerKey;
    if (v < kUnits) kvq::unpack_unit<F>(raw[i], u, S + kk * stride);
  }
}

// The format switches are uniform across the grid (no divergence); quantised formats need
// HD % 32 == 0 (checked on the host), so their cases exist only for such HD.
template <int HD, int TK>
__device__ __forceinline__ void fetch_any(int fmt, const uint8_t* base, int64_t row_bytes, int64_t capacity, int t0,
                                          int b_hi, uint4 (&raw)[units8_per_thread<HD, TK>()]) {
  if constexpr (HD % kvq::kGroup == 0) {
    if (fmt == kvq::kQ8) return fetch_tile<HD, TK, kvq::kQ8>(base, row_bytes, capacity, t0, b_hi, raw);
    if (fmt == kvq::kQ4) return fetch_tile<HD, TK, kvq::kQ4>(base, row_bytes, capacity, t0, b_hi, raw);
  }
  fetch_tile<HD, TK, kvq::kF16>(base, row_bytes, capacity, t0, b_hi, raw);
}

template <int HD, int TK>
__device__ __forceinline__ void store_any(int fmt, const uint4 (&raw)[units8_per_thread<HD, TK>()], float* S,
                                          int stride) {
  if constexpr (HD % kvq::kGroup == 0) {
    if (fmt == kvq::kQ8) return store_tile<HD, TK, kvq::kQ8>(raw, S, stride);
    if (fmt == kvq::kQ4) return store_tile<HD, TK, kvq::kQ4>(raw, S, stride);
  }
  store_tile<HD, TK, kvq::kF16>(raw, S, stride);
}

template <int HD, int R>
constexpr size_t smem_bytes() {
  constexpr int TK = tile_keys<HD>();
  return sizeof(float) * (size_t(R) * HD + size_t(TK) * (HD + 1) + size_t(TK) * HD + size_t(R) * TK + 3 * R);
}

// Grid: (row tiles, n_head_kv, n_splits). Block: kThreads. F32KV: K and V are f32; else each is
// f16, q8 or q4 (p.k_fmt, p.v_fmt).
template <int HD, int R, bool F32KV>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttnParams p) {
  constexpr int TK = tile_keys<HD>();
  constexpr int KP = HD + 1;                   // padded K row: conflict-free column reads
  constexpr int kRowsPerThread = R * TK / kThreads;  // score rows per thread (one key each)
  constexpr int kAcc = R * HD / kThreads;             // output elements per thread
  constexpr int kSub = kThreads / R;                  // threads per row in the softmax step
  static_assert(R * TK % kThreads == 0 && R * HD % kThreads == 0 && HD % 8 == 0);
  static_assert(kSub <= 32 && 32 % kSub == 0);

  extern __shared__ float smem[];
  float* Qs = smem;             // (R, HD)
  float* Ks = Qs + R * HD;      // (TK, KP)
  float* Vs = Ks + TK * KP;     // (TK, HD)
  float* Ps = Vs + TK * HD;     // (R, TK)
  float* row_m = Ps + R * TK;   // (R)
  float* row_l = row_m + R;     // (R)
  float* row_alpha = row_l + R; // (R)
  __shared__ int row_pos[R], row_lo[R];
  __shared__ int blk_range[2];

  const int tid = threadIdx.x;
  const int g = blockIdx.y;
  const int64_t n_rows = p.n_q * p.group;
  const int64_t row0 = int64_t(blockIdx.x) * R;

  // Rows: positions, window starts, and Q (pre-loaded to shared memory).
  if (tid < R) {
    const int64_t r = row0 + tid;
    if (r < n_rows) {
      const int pos = p.pos[r / p.group];
      row_pos[tid] = pos;
      row_lo[tid] = p.window > 0 ? int(int64_t(pos) - p.window + 1 > 0 ? int64_t(pos) - p.window + 1 : 0) : 0;
    } else {
      row_pos[tid] = -1;  // no keys
      row_lo[tid] = 0x7fffffff;
    }
    row_m[tid] = -INFINITY;
    row_l[tid] = 0.0f;
  }
  for (int e = tid; e < R * HD; e += kThreads) {
    const int r = e / HD, d = e % HD;
    const int64_t gr = row0 + r;
    float qv = 0.0f;
    if (gr < n_rows) {
      const int64_t qi = gr / p.group, h = int64_t(g) * p.group + gr % p.group;
      qv = p.q[(qi * p.n_head + h) * HD + d];
    }
    Qs[e] = qv;
  }
  __syncthreads();
  if (tid == 0) {
    int lo = 0x7fffffff, hi = -1;
    for (int r = 0; r < R; ++r) {
      if (row_pos[r] < 0) continue;
      lo = min(lo, row_lo[r]);
      hi = max(hi, row_pos[r]);
    }
    int b_lo = 0, b_hi = -1;
    if (hi >= lo) {
      const int64_t span = int64_t(hi) - lo + 1;
      int64_t chunk = (span + p.n_splits - 1) / p.n_splits;
      chunk = (chunk + TK - 1) / TK * TK;
      const int64_t s_lo = lo + chunk * blockIdx.z;
      const int64_t s_hi = s_lo + chunk - 1 < hi ? s_lo + chunk - 1 : int64_t(hi);
      if (s_lo <= s_hi) {
        b_lo = int(s_lo);
        b_hi = int(s_hi);
      }
    }
    blk_range[0] = b_lo;
    blk_range[1] = b_hi;
  }
  __syncthreads();
  const int b_lo = blk_range[0], b_hi = blk_range[1];


  float acc[kAcc];
#pragma unroll
  for (int k = 0; k < kAcc; ++k) acc[k] = 0.0f;

  const int kk_s = tid % TK;                       // this thread's key in the score step
  const int r_s = (tid / TK) * kRowsPerThread;     // its first row
  const int sub_r = tid / kSub, sub_lane = tid % kSub;

  for (int t0 = b_lo; t0 <= b_hi; t0 += TK) {
    // Load the K and V tile, decoded to f32 in shared memory.
    if constexpr (F32KV) {
      load_tile_f32<HD, TK>(p, t0, b_hi, g, Ks, Vs);
    } else {
      uint4 kraw[units8_per_thread<HD, TK>()], vraw[units8_per_thread<HD, TK>()];
      fetch_any<HD, TK>(p.k_fmt, p.k + int64_t(g) * p.k_head_bytes, p.k_row_bytes, p.capacity, t0, b_hi, kraw);
      fetch_any<HD, TK>(p.v_fmt, p.v + int64_t(g) * p.v_head_bytes, p.v_row_bytes, p.capacity, t0, b_hi, vraw);
      store_any<HD, TK>(p.k_fmt, kraw, Ks, KP);
      store_any<HD, TK>(p.v_fmt, vraw, Vs, HD);
    }
    __syncthreads();

    // Scores: this thread's key against kRowsPerThread rows.
    {
      float s[kRowsPerThread];
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) s[r] = 0.0f;
      const float* kr = Ks + kk_s * KP;
#pragma unroll 8
      for (int d = 0; d < HD; ++d) {
        const float kv = kr[d];
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) s[r] = fmaf(Qs[(r_s + r) * HD + d], kv, s[r]);
      }
      const int j = t0 + kk_s;
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const int rr = r_s + r;
        const bool ok = j <= b_hi && j <= row_pos[rr] && j >= row_lo[rr];
        Ps[rr * TK + kk_s] = ok ? s[r] * p.scale : -INFINITY;
      }
    }
    __syncthreads();

    // Online softmax, kSub threads per row.
    {
      float mx = -INFINITY;
      for (int i = sub_lane; i < TK; i += kSub) mx = fmaxf(mx, Ps[sub_r * TK + i]);
#pragma unroll
      for (int off = kSub / 2; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off, kSub));
      const float m_old = row_m[sub_r];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
      for (int i = sub_lane; i < TK; i += kSub) {
        const float sc = Ps[sub_r * TK + i];
        const float pr = m_new == -INFINITY ? 0.0f : expf(sc - m_new);  // exp(-inf) = 0 for masked keys
        Ps[sub_r * TK + i] = pr;
        sum += pr;
      }
#pragma unroll
      for (int off = kSub / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off, kSub);
      __syncwarp();
      if (sub_lane == 0) {
        const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
        row_alpha[sub_r] = alpha;
        row_m[sub_r] = m_new;
        row_l[sub_r] = row_l[sub_r] * alpha + sum;
      }
    }
    __syncthreads();

    // acc = acc * alpha + P V.
#pragma unroll
    for (int k = 0; k < kAcc; ++k) {
      const int e = tid + k * kThreads;
      const int r = e / HD, d = e % HD;
      float a = acc[k] * row_alpha[r];
      const float* pr = Ps + r * TK;
#pragma unroll 8
      for (int kk = 0; kk < TK; ++kk) a = fmaf(pr[kk], Vs[kk * HD + d], a);
      acc[k] = a;
    }
    __syncthreads();
  }

  // Output: final (n_splits == 1) or partial.
#pragma unroll
  for (int k = 0; k < kAcc; ++k) {
    const int e = tid + k * kThreads;
    const int r = e / HD, d = e % HD;
    const int64_t gr = row0 + r;
    if (gr >= n_rows) continue;
    const int64_t qi = gr / p.group, h = int64_t(g) * p.group + gr % p.group;
    const int64_t orow = qi * p.n_head + h;
    if (p.n_splits == 1) {
      p.out[orow * HD + d] = acc[k] / row_l[r];
    } else {
      const int64_t prow = int64_t(blockIdx.z) * p.n_q * p.n_head + orow;
      p.part_acc[prow * HD + d] = acc[k];
      if (d == 0) {
        p.part_ml[prow * 2] = row_m[r];
        p.part_ml[prow * 2 + 1] = row_l[r];
      }
    }
  }
}

// Merges the splits of one (query, head) row: out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
__global__ void combine_kernel(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                               int64_t n_rows, int n_splits, int head_dim, float* out) {
  const int64_t row = blockIdx.x;
  float M = -INFINITY;
  for (int s = 0; s < n_splits; ++s) M = fmaxf(M, part_ml[(s * n_rows + row) * 2]);
  float L = 0.0f;
  for (int s = 0; s < n_splits; ++s) {
    const float m = part_ml[(s * n_rows + row) * 2];
    if (m != -INFINITY) L += expf(m - M) * part_ml[(s * n_rows + row) * 2 + 1];
  }
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float a = 0.0f;
    for (int s = 0; s < n_splits; ++s) {
      const float m = part_ml[(s * n_rows + row) * 2];
      if (m != -INFINITY) a += expf(m - M) * part_acc[(s * n_rows + row) * head_dim + d];
    }
    out[row * head_dim + d] = a / L;
  }
}

// ---- host side ----

int fmt_of(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return kvq::kF32;
    case GgmlType::F16: return kvq::kF16;
    case GgmlType::Q8_0: return kvq::kQ8;
    default: return kvq::kQ4;
  }
}

int sm_count() {
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    return 132;
  }
  return n > 0 ? n : 132;
}

bool supported_head_dim(int64_t hd) { return hd == 32 || hd == 48 || hd == 64 || hd == 96 || hd == 128 || hd == 256; }

int rows_per_block(int64_t n_q, const AttentionShapeDev& s) {
  return n_q * (s.n_head / std::max<int64_t>(1, s.n_head_kv)) <= 8 ? 8 : 32;
}

// Splits that keep the GPU busy: about four blocks per multiprocessor, at most kMaxSplits, and no
// more than max_keys / kMinKeysPerSplit.
int desired_splits(int64_t n_q, const AttentionShapeDev& s, int64_t max_keys) {
  const int64_t group = s.n_head / std::max<int64_t>(1, s.n_head_kv);
  const int64_t R = rows_per_block(n_q, s);
  const int64_t base = s.n_head_kv * ((n_q * group + R - 1) / R);
  if (base <= 0) return 1;
  int64_t splits = (4 * int64_t(sm_count()) + base - 1) / base;
  splits = std::min<int64_t>(splits, kMaxSplits);
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, (max_keys + kMinKeysPerSplit - 1) / kMinKeysPerSplit));
  return int(std::max<int64_t>(splits, 1));
}

size_t bytes_per_split(int64_t n_q, const AttentionShapeDev& s) {
  return size_t(n_q * s.n_head) * size_t(s.head_dim + 2) * sizeof(float);
}

template <int HD, int R, bool F32KV>
Status launch(const AttnParams& p, cudaStream_t st) {
  constexpr size_t smem = smem_bytes<HD, R>();
  // Per call (cheap, not a stream operation): the limit is per device and the current device may change.
  const cudaError_t err =
      cudaFuncSetAttribute(attention_kernel<HD, R, F32KV>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return Status::error("attention: cudaFuncSetAttribute: {}", cudaGetErrorString(err));
  const int64_t tiles = (p.n_q * p.group + R - 1) / R;
  if (tiles > 0x7fffffff || p.n_head_kv > 65535) return Status::error("attention: grid too large");
  const dim3 grid(unsigned(tiles), unsigned(p.n_head_kv), unsigned(p.n_splits));
  attention_kernel<HD, R, F32KV><<<grid, kThreads, smem, st>>>(p);
  return launch_status("attention");
}

template <int HD, bool F32KV>
Status launch_rows(const AttnParams& p, int R, cudaStream_t st) {
  return R == 8 ? launch<HD, 8, F32KV>(p, st) : launch<HD, 32, F32KV>(p, st);
}

template <bool F32KV>
Status launch_hd(const AttnParams& p, int64_t hd, int R, cudaStream_t st) {
  switch (hd) {
    case 32: return launch_rows<32, F32KV>(p, R, st);
    case 48: return launch_rows<48, F32KV>(p, R, st);
    case 64: return launch_rows<64, F32KV>(p, R, st);
    case 96: return launch_rows<96, F32KV>(p, R, st);
    case 128: return launch_rows<128, F32KV>(p, R, st);
    case 256: return launch_rows<256, F32KV>(p, R, st);
    default: return Status::error("attention: unsupported head_dim {}", hd);
  }
}

}  // namespace

size_t attention_workspace_bytes(int64_t n_q, const AttentionShapeDev& s, int64_t max_keys) {
  if (n_q <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.head_dim <= 0) return 0;
  const int splits = desired_splits(n_q, s, max_keys);
  const size_t tiled = splits > 1 ? size_t(splits) * bytes_per_split(n_q, s) : 0;
  const size_t partials = std::max(tiled, decode_attention_workspace_bytes(n_q, s, max_keys));
  return (partials + 15) / 16 * 16 + kAttentionCounterBytes;  // attention_partial_bytes gives back `partials`
}

Status attention_workspace_clear(Workspace ws, Stream s) {
  unsigned* counters = attention_counters(ws);
  if (!counters) return Status::ok();
  return detail::cuda_status(cudaMemsetAsync(counters, 0, kAttentionCounterBytes, as_stream(s)),
                             "attention_workspace_clear");
}

bool attention_rows_exact(const float* d_q, int64_t n_q, const KvStoreDev& kv, const AttentionShapeDev& s, Workspace ws) {
  return decode_attention_applies(n_q, s.head_dim, kv.k_dtype, kv.v_dtype) &&
         reinterpret_cast<uintptr_t>(d_q) % 16 == 0 && decode_attention_split_fits(n_q, kv, s, ws);
}

namespace {
// attention() and attention_tree(): validation, then the kernel that applies.
Status attention_checked(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                         const AttentionShapeDev& s, float* d_out, Workspace ws, Stream s_, AttentionKernel kernel,
                         const TreeMaskDev* tree, const ActRounding* round = nullptr, bool* rounded = nullptr,
                         const TreePathDev* path = nullptr);
}  // namespace

Status attention_round(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                       const AttentionShapeDev& s, float* d_out, Workspace ws, const ActRounding& r, bool* rounded,
                       Stream st) {
  if (!rounded) return Status::error("attention_round: null flag");
  *rounded = false;
  return attention_checked(d_q, d_pos, n_q, kv, s, d_out, ws, st, AttentionKernel::best, nullptr, &r, rounded);
}

Status attention(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv, const AttentionShapeDev& s,
                 float* d_out, Workspace ws, Stream s_, AttentionKernel kernel) {
  return attention_checked(d_q, d_pos, n_q, kv, s, d_out, ws, s_, kernel, nullptr);
}

Status attention_tree(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                      const AttentionShapeDev& s, const TreeMaskDev& tree, float* d_out, Workspace ws, Stream s_) {
  return attention_checked(d_q, d_pos, n_q, kv, s, d_out, ws, s_, AttentionKernel::best, tree.d_bits ? &tree : nullptr);
}

Status attention_tree_path(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                           const AttentionShapeDev& s, const TreePathDev& path, float* d_out, Workspace ws, Stream s_) {
  if (!path.d_slots || !path.d_n) return Status::error("attention_tree_path: null path");
  if (n_q < 1 || n_q > int64_t(kDecodeMaxQueries) || (n_q > 1 && path.stride <= 0))
    return Status::error(
        "attention_tree_path: {} queries with path stride {} (1..{} queries, stride > 0 for more than one)", n_q,
        path.stride, kDecodeMaxQueries);
  if (!attention_rows_exact(d_q, 1, kv, s, ws))
    return Status::error("attention_tree_path: flash-decoding does not apply (KV {} / {}, head_dim {})",
                         ggml_type_info(kv.k_dtype).name, ggml_type_info(kv.v_dtype).name, s.head_dim);
  return attention_checked(d_q, d_pos, n_q, kv, s, d_out, ws, s_, AttentionKernel::best, nullptr, nullptr, nullptr,
                           &path);
}

namespace {

Status attention_checked(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                         const AttentionShapeDev& s, float* d_out, Workspace ws, Stream s_, AttentionKernel kernel,
                         const TreeMaskDev* tree, const ActRounding* round, bool* rounded, const TreePathDev* path) {
  if (!d_q || !d_pos || !d_out) return Status::error("attention: null pointer");
  if (Status st = check_kv("attention", kv); !st) return st;
  if (s.n_head <= 0 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0) {
    return Status::error("attention: n_head {} is not a positive multiple of n_head_kv {}", s.n_head, s.n_head_kv);
  }
  if (!supported_head_dim(s.head_dim)) {
    return Status::error("attention: head_dim {} unsupported (32, 48, 64, 96, 128, 256)", s.head_dim);
  }
  const bool quantised = kv.k_dtype == GgmlType::Q8_0 || kv.k_dtype == GgmlType::Q4_1 ||
                         kv.v_dtype == GgmlType::Q8_0 || kv.v_dtype == GgmlType::Q4_1;
  if (quantised && s.head_dim % kvq::kGroup != 0)
    return Status::error("attention: quantised KV needs head_dim % 32 == 0 (head_dim {})", s.head_dim);
  if (s.window < 0) return Status::error("attention: negative window {}", s.window);
  if (s.sinks < 0 || (s.sinks > 0 && s.window == 0))
    return Status::error("attention: {} sinks with window {} (sinks need a window)", s.sinks, s.window);
  if (n_q < 0) return Status::error("attention: negative n_q {}", n_q);
  if (n_q == 0) return Status::ok();
  const cudaStream_t st = as_stream(s_);
  // 1..64 queries over f16 / q8 / q4 KV: flash-decoding (attention_decode.cu; q rows are read as
  // float4). Everything else: the tensor-core kernel for long chunks (any KV type), else the tiled one.
  const bool decode = decode_attention_applies(n_q, s.head_dim, kv.k_dtype, kv.v_dtype) &&
                      reinterpret_cast<uintptr_t>(d_q) % 16 == 0;
  if (tree && tree->d_bits) {
    if (kernel != AttentionKernel::best || !decode)
      return Status::error("attention: a tree mask needs flash-decoding ({} queries, head_dim {}, 16-byte aligned q)",
                           n_q, s.head_dim);
    return decode_attention(d_q, d_pos, n_q, kv, s, d_out, ws, st, tree);
  }
  if (kernel == AttentionKernel::best && decode)
    return decode_attention(d_q, d_pos, n_q, kv, s, d_out, ws, st, nullptr, round, rounded, path);
  if (path && path->d_slots) return Status::error("attention: a tree path needs flash-decoding");
  // The tiled and tensor-core kernels walk one contiguous key range per row.
  if (s.sinks > 0)
    return Status::error("attention: sinks need flash-decoding ({} queries, KV {} / {}, head_dim {})", n_q,
                         ggml_type_info(kv.k_dtype).name, ggml_type_info(kv.v_dtype).name, s.head_dim);

  AttnParams p{};
  p.q = d_q;
  p.pos = d_pos;
  p.k = static_cast<const uint8_t*>(kv.d_k);
  p.v = static_cast<const uint8_t*>(kv.d_v);
  const int64_t width = s.n_head_kv * s.head_dim;
  p.k_row_bytes = int64_t(ggml_row_bytes(kv.k_dtype, uint64_t(width)));
  p.v_row_bytes = int64_t(ggml_row_bytes(kv.v_dtype, uint64_t(width)));
  p.k_head_bytes = int64_t(ggml_row_bytes(kv.k_dtype, uint64_t(s.head_dim)));
  p.v_head_bytes = int64_t(ggml_row_bytes(kv.v_dtype, uint64_t(s.head_dim)));
  p.k_fmt = fmt_of(kv.k_dtype);
  p.v_fmt = fmt_of(kv.v_dtype);
  p.out = d_out;
  p.n_q = n_q;
  p.n_head = s.n_head;
  p.n_head_kv = s.n_head_kv;
  p.capacity = kv.capacity;
  p.window = s.window;
  p.group = int(s.n_head / s.n_head_kv);
  p.scale = s.scale;
  // Splits: as many as wanted, as far as the workspace holds them (the caller sized it with
  // attention_workspace_bytes for its longest context).
  int splits = desired_splits(n_q, s, int64_t(1) << 40);
  const size_t per = bytes_per_split(n_q, s);
  splits = int(std::min<size_t>(size_t(splits), attention_partial_bytes(ws) / per));  // not the decode counters
  if (splits < 2) splits = 1;
  p.n_splits = splits;
  if (splits > 1) {
    p.part_acc = static_cast<float*>(ws.d_ptr);
    p.part_ml = p.part_acc + size_t(splits) * size_t(n_q * s.n_head) * size_t(s.head_dim);
  }

  if (kernel == AttentionKernel::best && attention_tc_applies(n_q, s.head_dim, kv.k_dtype, kv.v_dtype)) {
    const TcAttnParams tp{d_q,           d_pos,         p.k,      p.v,         p.k_row_bytes, p.v_row_bytes,
                          p.k_head_bytes, p.v_head_bytes, d_out,    n_q,         s.n_head,      s.n_head_kv,
                          kv.capacity,    s.window,       p.group,  s.scale};
    return attention_tc(tp, s.head_dim, kv.k_dtype, kv.v_dtype, st);
  }
  const int R = rows_per_block(n_q, s);
  Status status = kv.k_dtype == GgmlType::F32 ? launch_hd<true>(p, s.head_dim, R, st)
                                              : launch_hd<false>(p, s.head_dim, R, st);
  if (!status || splits == 1) return status;
  const int64_t rows = n_q * s.n_head;
  if (rows > 0x7fffffff) return Status::error("attention: too many rows ({})", rows);
  combine_kernel<<<unsigned(rows), 128, 0, st>>>(p.part_acc, p.part_ml, rows, splits, int(s.head_dim), d_out);
  return launch_status("attention (combine)");
}

}  // namespace

}  // namespace strata::kernels::cuda
