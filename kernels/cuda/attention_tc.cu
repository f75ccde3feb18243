// Tensor-core attention for prefill chunks (FlashAttention-2 style), f16 or f32 KV (f32 is
// rounded to f16 as the tile is loaded), head_dim 64 or 128.
// Same semantics and KV layout as attention.cu (kernels/cpu/attention.h): causal, optional sliding
// window, grouped KV heads, position p in slot p % capacity.
//
// Why a second kernel: the SIMT kernel computes scores and P.V in f32 FMAs (~10 TFLOP/s on an
// H200), which made attention ~45% of a 27B prefill chunk at 1-2K context and the bulk of it at
// 32K+. Here Q.K^T and P.V run on tensor cores (wmma m16n16k16, f16 in, f32 accumulate).
//
// Block: one KV head g and BM = 64 consecutive "rows" (row r = query r / group, head
// g * group + r % group, as in attention.cu), 4 warps of 16 rows. It walks the keys its rows can
// see in tiles of BN = 64: K and V tiles go to shared memory once per block; each warp computes its
// 16 x 64 scores, the online softmax (running max m, sum l) in f32, P in f16, and P.V; the output
// accumulates in shared memory in f32 and is rescaled per row by exp(m_old - m_new).
//
// Precision: Q and P (and f32 K/V) are rounded to f16 before their products: about
// 1e-3 relative on the output, against ~1e-6 for the f32 kernel. It is used only for chunks of at
// least kTcMinQueries (65) queries, so decode and speculative verification (<= 64 tokens) keep an f32
// kernel and its results.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/cuda_check.cuh"

namespace strata::kernels::cuda {
namespace {

using namespace nvcuda;

constexpr int BM = 64, BN = 64, kWarps = 4, kThreads = 32 * kWarps;
constexpr int kPadH = 8, kPadF = 4;  // row padding (elements): spreads rows over banks, keeps wmma ldm legal

template <int HD>
struct Smem {
  static constexpr int ldh = HD + kPadH;   // Q, K, V tiles (half)
  static constexpr int ldp = BN + kPadH;   // P (half)
  static constexpr int lds = BN + kPadF;   // S (float)
  static constexpr int ldo = HD + kPadF;   // O and the P.V of a tile (float)
  static constexpr size_t q = size_t(BM) * ldh * 2, k = size_t(BN) * ldh * 2, v = k, p = size_t(BM) * ldp * 2;
  // S and the tile's P.V are never live together (a block barrier separates them): one buffer.
  static constexpr size_t st = (size_t(BM) * (lds > ldo ? lds : ldo)) * 4;
  static constexpr size_t o = size_t(BM) * ldo * 4;
  static constexpr size_t rows = size_t(BM) * 4 * 5;  // m, l, alpha (float), pos, lo (int); + blk_range
  static constexpr size_t total = q + k + v + p + st + o + rows + 16;
};

// 8 consecutive K/V elements of a slot row as 8 halves (one 16-byte vector).
template <typename T>
__device__ __forceinline__ uint4 load8_as_half(const T* row, int c);
template <>
__device__ __forceinline__ uint4 load8_as_half<half>(const half* row, int c) {
  return __ldg(reinterpret_cast<const uint4*>(row) + c);
}
template <>
__device__ __forceinline__ uint4 load8_as_half<float>(const float* row, int c) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(row) + 2 * c), b = __ldg(reinterpret_cast<const float4*>(row) + 2 * c + 1);
  const __half2 h[4] = {__floats2half2_rn(a.x, a.y), __floats2half2_rn(a.z, a.w), __floats2half2_rn(b.x, b.y),
                        __floats2half2_rn(b.z, b.w)};
  return *reinterpret_cast<const uint4*>(h);
}

template <int HD, typename T>
__global__ void __launch_bounds__(kThreads) attention_tc_kernel(TcAttnParams prm) {
  using S = Smem<HD>;
  extern __shared__ __align__(128) unsigned char smem[];  // wmma pointers need 32-byte alignment
  half* Qs = reinterpret_cast<half*>(smem);
  half* Ks = reinterpret_cast<half*>(smem + S::q);
  half* Vs = reinterpret_cast<half*>(smem + S::q + S::k);
  half* Ps = reinterpret_cast<half*>(smem + S::q + S::k + S::v);
  float* ST = reinterpret_cast<float*>(smem + S::q + S::k + S::v + S::p);
  float* Os = reinterpret_cast<float*>(smem + S::q + S::k + S::v + S::p + S::st);
  float* row_m = reinterpret_cast<float*>(smem + S::q + S::k + S::v + S::p + S::st + S::o);
  float* row_l = row_m + BM;
  float* row_alpha = row_l + BM;
  int* row_pos = reinterpret_cast<int*>(row_alpha + BM);
  int* row_lo = row_pos + BM;
  int* blk_range = row_lo + BM;  // (no static shared memory: the dynamic buffer starts aligned)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = blockIdx.y;
  const int64_t n_rows = prm.n_q * prm.group;
  const int64_t row0 = int64_t(blockIdx.x) * BM;

  if (tid < BM) {
    const int64_t r = row0 + tid;
    if (r < n_rows) {
      const int pos = prm.pos[r / prm.group];
      row_pos[tid] = pos;
      row_lo[tid] = prm.window > 0 ? int(max(int64_t(pos) - prm.window + 1, int64_t(0))) : 0;
    } else {
      row_pos[tid] = -1;  // no keys
      row_lo[tid] = 0x7fffffff;
    }
    row_m[tid] = -INFINITY;
    row_l[tid] = 0.0f;
  }
  for (int e = tid; e < BM * HD; e += kThreads) {
    const int r = e / HD, d = e % HD;
    const int64_t gr = row0 + r;
    float qv = 0.0f;
    if (gr < n_rows) {
      const int64_t qi = gr / prm.group, h = int64_t(g) * prm.group + gr % prm.group;
      qv = prm.q[(qi * prm.n_head + h) * HD + d];
    }
    Qs[r * S::ldh + d] = __float2half_rn(qv);
    Os[r * S::ldo + d] = 0.0f;
  }
  __syncthreads();
  if (tid == 0) {
    int lo = 0x7fffffff, hi = -1;
    for (int r = 0; r < BM; ++r) {
      if (row_pos[r] < 0) continue;
      lo = min(lo, row_lo[r]);
      hi = max(hi, row_pos[r]);
    }
    blk_range[0] = lo;
    blk_range[1] = hi;
  }
  __syncthreads();
  const int b_lo = blk_range[0], b_hi = blk_range[1];

  const int64_t kv_stride = prm.n_head_kv * HD;  // elements per slot
  const T* K = static_cast<const T*>(prm.k) + int64_t(g) * HD;
  const T* V = static_cast<const T*>(prm.v) + int64_t(g) * HD;
  constexpr int kVecPerRow = HD / 8;  // 16-byte vectors per K/V row

  for (int j0 = b_lo; j0 <= b_hi; j0 += BN) {
    // K and V tile: keys j0 .. j0 + BN - 1 (zeros past b_hi: finite, and masked below).
    for (int e = tid; e < BN * kVecPerRow; e += kThreads) {
      const int kk = e / kVecPerRow, c = e % kVecPerRow;
      const int j = j0 + kk;
      uint4 kv4 = make_uint4(0, 0, 0, 0), vv4 = make_uint4(0, 0, 0, 0);
      if (j <= b_hi) {
        const int64_t slot = int64_t(j) % prm.capacity;
        kv4 = load8_as_half<T>(K + slot * kv_stride, c);
        vv4 = load8_as_half<T>(V + slot * kv_stride, c);
      }
      *reinterpret_cast<uint4*>(Ks + kk * S::ldh + c * 8) = kv4;
      *reinterpret_cast<uint4*>(Vs + kk * S::ldh + c * 8) = vv4;
    }
    __syncthreads();

    // Scores of this warp's 16 rows against the tile's 64 keys.
    const int wr = warp * 16;
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[BN / 16];
#pragma unroll
      for (int n = 0; n < BN / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
      for (int kd = 0; kd < HD / 16; ++kd) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
        wmma::load_matrix_sync(a, Qs + wr * S::ldh + kd * 16, S::ldh);
#pragma unroll
        for (int n = 0; n < BN / 16; ++n) {
          // K^T as a column-major (dim x key) matrix: element (d, key) at Ks[key * ldh + d].
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
          wmma::load_matrix_sync(b, Ks + n * 16 * S::ldh + kd * 16, S::ldh);
          wmma::mma_sync(acc[n], a, b, acc[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < BN / 16; ++n)
        wmma::store_matrix_sync(ST + wr * S::lds + n * 16, acc[n], S::lds, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: two lanes per row, 32 keys each.
    {
      const int r = wr + lane / 2, k0 = (lane % 2) * (BN / 2);
      const int pos = row_pos[r], lo = row_lo[r];
      float s[BN / 2];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) {
        const int j = j0 + k0 + i;
        const bool ok = j <= pos && j >= lo;
        s[i] = ok ? ST[r * S::lds + k0 + i] * prm.scale : -INFINITY;
        mx = fmaxf(mx, s[i]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_old = row_m[r];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) {
        const float pr = m_new == -INFINITY ? 0.0f : __expf(s[i] - m_new);  // exp(-inf) = 0: masked keys
        sum += pr;
        Ps[r * S::ldp + k0 + i] = __float2half_rn(pr);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      __syncwarp();
      if (lane % 2 == 0) {
        const float alpha = m_old == -INFINITY ? 0.0f : __expf(m_old - m_new);
        row_alpha[r] = alpha;
        row_l[r] = row_l[r] * alpha + sum;
        row_m[r] = m_new;
      }
    }
    __syncthreads();  // S is dead in every warp: its buffer takes the P.V tile

    // P.V for this warp's rows, then O = O * alpha + P.V.
    {
#pragma unroll
      for (int d = 0; d < HD / 16; ++d) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
          wmma::load_matrix_sync(a, Ps + wr * S::ldp + kk * 16, S::ldp);
          wmma::load_matrix_sync(b, Vs + kk * 16 * S::ldh + d * 16, S::ldh);
          wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(ST + wr * S::ldo + d * 16, acc, S::ldo, wmma::mem_row_major);
      }
      __syncwarp();
      for (int e = lane; e < 16 * HD; e += 32) {
        const int r = wr + e / HD, d = e % HD;
        Os[r * S::ldo + d] = Os[r * S::ldo + d] * row_alpha[r] + ST[r * S::ldo + d];
      }
    }
    __syncthreads();  // before the next tile overwrites K, V and the S buffer
  }

  for (int e = tid; e < BM * HD; e += kThreads) {
    const int r = e / HD, d = e % HD;
    const int64_t gr = row0 + r;
    if (gr >= n_rows) continue;
    const int64_t qi = gr / prm.group, h = int64_t(g) * prm.group + gr % prm.group;
    const float l = row_l[r];
    prm.out[(qi * prm.n_head + h) * HD + d] = l > 0.0f ? Os[r * S::ldo + d] / l : 0.0f;
  }
}

template <int HD, typename T>
Status launch(const TcAttnParams& p, cudaStream_t st) {
  constexpr size_t smem = Smem<HD>::total;
  const cudaError_t err =
      cudaFuncSetAttribute(attention_tc_kernel<HD, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  STRATA_TRY(detail::cuda_status(err, "attention (tensor cores): cudaFuncSetAttribute"));
  const int64_t tiles = (p.n_q * p.group + BM - 1) / BM;
  if (tiles > 0x7fffffff || p.n_head_kv > 65535) return Status::error("attention (tensor cores): grid too large");
  attention_tc_kernel<HD, T><<<dim3(unsigned(tiles), unsigned(p.n_head_kv)), kThreads, smem, st>>>(p);
  return detail::launch_status("attention (tensor cores)");
}

}  // namespace

bool attention_tc_applies(int64_t n_q, int64_t head_dim, GgmlType k, GgmlType v) {
  return n_q >= kTcMinQueries && (head_dim == 64 || head_dim == 128) && k == v &&
         (k == GgmlType::F16 || k == GgmlType::F32);
}

Status attention_tc(const TcAttnParams& p, int64_t head_dim, bool kv_f16, cudaStream_t st) {
  switch (head_dim) {
    case 64: return kv_f16 ? launch<64, half>(p, st) : launch<64, float>(p, st);
    case 128: return kv_f16 ? launch<128, half>(p, st) : launch<128, float>(p, st);
    default: return Status::error("attention (tensor cores): head_dim {} unsupported (64, 128)", head_dim);
  }
}

}  // namespace strata::kernels::cuda
