// QK-norm and RoPE of every Q and K head in one launch (cuda_api.h qk_norm_rope): a decode step
// used to spend four launches here (norm Q, norm K, rope Q, rope K), each a few microseconds of
// mostly launch and memory latency for a few KiB of data.
//
// Grid (token, group of kWarps heads); warp w of a block takes one head of Q or K (Q heads first):
// it loads the head into its shared row, sums x^2 in double (each lane its elements in order, then
// a fixed xor-shuffle tree), scales by inv = 1 / sqrt(mean + eps) and the weight with
// non-contracted multiplies (rms_norm's roundings: only the order of the double sum differs),
// then rotates the pairs with the angles rope() computes (double pow and sincos per pair, rounded
// to f32: rope_cos_sin) and writes the head back. The angles come from a table that rope_angles
// filled once for the step's positions (QkRopeDev::angles; every layer of one RoPE configuration
// reads the same table), or else the block computes them itself. The double pow and sincos are
// most of a decode-sized launch's latency (~60 layers per step), and the head's loads are issued
// before them either way.
//
// qk_norm_rope_kv (rope_kv.h) also stores each K head, and n_head_kv more warps each V head, into
// the KV cache (kv_write's conversions, per element or per 32-value group: the same bits), so a
// layer's K/V write is not a launch of its own.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include <cuda_fp16.h>

#include "kernels/cuda/attention_internal.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/kv_quant.cuh"
#include "kernels/cuda/matmul_internal.h"
#include "kernels/cuda/pdl_launch.cuh"
#include "kernels/cuda/rope_kv.h"

namespace strata::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxHeadDim = 512;

// Values r[0, hd) of one head (a warp's shared row) into slot pos % capacity of a cache of rows of
// `width` values, at head offset `col`, converted to the cache's dtype as kv_write converts them.
__device__ __forceinline__ void store_head(const float* r, int64_t hd, void* cache, GgmlType dtype, int64_t slot,
                                           int64_t width, int64_t col, int lane) {
  if (dtype == GgmlType::F16) {
    __half* d = static_cast<__half*>(cache) + slot * width + col;
    for (int64_t i = lane; i < hd; i += 32) d[i] = __float2half_rn(r[i]);
  } else if (dtype == GgmlType::F32) {
    float* d = static_cast<float*>(cache) + slot * width + col;
    for (int64_t i = lane; i < hd; i += 32) d[i] = r[i];
  } else {
    const bool q8 = dtype == GgmlType::Q8_0;
    const int64_t bytes = q8 ? kvq::kQ8Bytes : kvq::kQ4Bytes, groups = width / kvq::kGroup;
    uint8_t* row = static_cast<uint8_t*>(cache) + slot * groups * bytes + (col / kvq::kGroup) * bytes;
    for (int64_t g = 0; g < hd / kvq::kGroup; ++g) {
      if (q8) kvq::quantize_q8_group(r[g * kvq::kGroup + lane], lane, row + g * bytes);
      else kvq::quantize_q4_group(r[g * kvq::kGroup + lane], lane, row + g * bytes);
    }
  }
}

// cos and sin of pair i's angle at position pos, as rope() computes them: the same expression
// here and in rope_angles_kernel, so a table entry has the bits the in-block computation gives.
__device__ __forceinline__ float2 rope_cos_sin(int32_t pos, int64_t i, const QkRopeDev& p, double base) {
  const float ps = float(pos) / p.linear_scale;  // as the CPU forward: float(pos) / lin
  double theta = double(ps) * pow(base, -2.0 * double(i) / double(p.head_dim));
  if (p.freq_div) theta /= double(p.freq_div[i]);
  double sd, cd;
  sincos(theta, &sd, &cd);
  return make_float2(float(cd), float(sd));
}

// Grid n_tok, block head_dim / 2 threads: table[t * half + i] = rope_cos_sin(pos[t], i).
__global__ void rope_angles_kernel(const int32_t* __restrict__ pos, QkRopeDev p, double base, float2* table) {
  detail::pdl_wait();  // where launched early (pdl_launch.cuh)
  detail::pdl_launch_dependents();
  const int64_t half = p.head_dim / 2, t = blockIdx.x;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) table[t * half + i] = rope_cos_sin(pos[t], i, p, base);
}

// to_cache: K heads also go to kv, and V heads (v_rows; the grid has warps for them after the K
// heads) too.
__global__ void __launch_bounds__(kWarps * 32)
    qk_norm_rope_kernel(float* q, float* k, const int32_t* __restrict__ pos, QkRopeDev p, double base,
                        const float* __restrict__ v_rows, bool to_cache, KvStoreDev kv) {
  detail::pdl_wait();                // where launched early (pdl_launch.cuh): q, k, v are the GEMVs'
  detail::pdl_launch_dependents();  // the attention after it may be scheduled
  const int64_t t = blockIdx.x, hd = p.head_dim, half = hd / 2;
  __shared__ float cs[kMaxHeadDim / 2], sn[kMaxHeadDim / 2];
  __shared__ float row[kWarps][kMaxHeadDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t h = int64_t(blockIdx.y) * kWarps + warp;
  const int64_t width = p.n_head_kv * hd;
  const bool is_v = to_cache && h >= p.n_head + p.n_head_kv && h < p.n_head + 2 * p.n_head_kv;
  const bool is_qk = h < p.n_head + p.n_head_kv, is_q = h < p.n_head;
  float* r = row[warp];
  float* v = is_q ? q + (t * p.n_head + h) * hd : k + (t * p.n_head_kv + (h - p.n_head)) * hd;
  const float* wn = is_q ? p.q_norm : p.k_norm;
  // The head's loads (and its sum of squares) first: they do not wait for the angles.
  double ss = 0;
  if (is_v) {
    const int64_t vh = h - p.n_head - p.n_head_kv;
    for (int64_t i = lane; i < hd; i += 32) r[i] = v_rows[t * width + vh * hd + i];
  } else if (is_qk) {
    for (int64_t i = lane; i < hd; i += 32) {
      const float x = v[i];
      r[i] = x;
      if (wn) ss += double(x) * double(x);
    }
  }
  const float2* table = reinterpret_cast<const float2*>(p.angles);
  if (!table) {  // uniform over the grid: every thread reaches the barrier
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const float2 a = rope_cos_sin(pos[t], i, p, base);
      cs[i] = a.x, sn[i] = a.y;
    }
    __syncthreads();
  }
  if (!is_v && !is_qk) return;
  const int64_t slot = to_cache ? int64_t(pos[t]) % kv.capacity : 0;
  __syncwarp();
  if (is_v) {
    store_head(r, hd, kv.d_v, kv.v_dtype, slot, width, (h - p.n_head - p.n_head_kv) * hd, lane);
    return;
  }
  if (wn) {
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float inv = float(1.0 / sqrt(ss / double(hd) + double(p.eps)));
    for (int64_t i = lane; i < hd; i += 32) r[i] = __fmul_rn(__fmul_rn(r[i], inv), wn[i]);
    __syncwarp();
  }
  for (int64_t i = lane; i < half; i += 32) {
    const int64_t ia = p.neox ? i : 2 * i, ib = p.neox ? i + half : 2 * i + 1;
    float c, s;
    if (table) {
      const float2 a = table[t * half + i];
      c = a.x, s = a.y;
    } else {
      c = cs[i], s = sn[i];
    }
    const float x0 = r[ia], x1 = r[ib];
    const float y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s)), y1 = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
    v[ia] = y0, v[ib] = y1;
    r[ia] = y0, r[ib] = y1;  // the pair is this lane's alone
  }
  if (to_cache && !is_q) {
    __syncwarp();
    store_head(r, hd, kv.d_k, kv.k_dtype, slot, width, (h - p.n_head) * hd, lane);
  }
}

Status check_rope_args(const char* op, float* d_q, float* d_k, const int32_t* d_pos, int64_t n_tok, const QkRopeDev& p) {
  if (!d_q || !d_k || !d_pos) return Status::error("{}: null pointer", op);
  if (n_tok < 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0 || p.head_dim % 2 != 0 ||
      p.head_dim > kMaxHeadDim) {
    return Status::error("{}: bad shape (n_tok {}, n_head {}, n_head_kv {}, head_dim {})", op, n_tok, p.n_head,
                         p.n_head_kv, p.head_dim);
  }
  if (!(p.base > 0) || !(p.linear_scale > 0))
    return Status::error("{}: bad base {} or linear scale {}", op, p.base, p.linear_scale);
  if (n_tok > 0x7fffffff) return Status::error("{}: too many tokens ({})", op, n_tok);
  return Status::ok();
}

}  // namespace

Status qk_norm_rope(float* d_q, float* d_k, const int32_t* d_pos, int64_t n_tok, const QkRopeDev& p, Stream s) {
  STRATA_TRY(check_rope_args("qk_norm_rope", d_q, d_k, d_pos, n_tok, p));
  if (n_tok == 0) return Status::ok();
  const dim3 grid(unsigned(n_tok), unsigned((p.n_head + p.n_head_kv + kWarps - 1) / kWarps));
  detail::launch_pdl(detail::small_kernel_pdl(), qk_norm_rope_kernel, grid, dim3(kWarps * 32), 0,
                     static_cast<cudaStream_t>(s), d_q, d_k, d_pos, p, double(p.base),
                     static_cast<const float*>(nullptr), false, KvStoreDev{});
  return detail::launch_status("qk_norm_rope");
}

Status rope_angles(const int32_t* d_pos, int64_t n_tok, const QkRopeDev& p, float* d_table, Stream s) {
  float dummy = 0;
  STRATA_TRY(check_rope_args("rope_angles", &dummy, &dummy, d_pos, n_tok, p));
  if (!d_table) return Status::error("rope_angles: null table");
  if (n_tok == 0) return Status::ok();
  const unsigned threads = unsigned(std::min<int64_t>(p.head_dim / 2, 256));
  detail::launch_pdl(detail::small_kernel_pdl(), rope_angles_kernel, dim3(unsigned(n_tok)), dim3(threads), 0,
                     static_cast<cudaStream_t>(s), d_pos, p, double(p.base), reinterpret_cast<float2*>(d_table));
  return detail::launch_status("rope_angles");
}

bool qk_norm_rope_kv_applies(const KvStoreDev& kv, int64_t head_dim) {
  auto ok = [&](GgmlType t) {
    return t == GgmlType::F16 || t == GgmlType::F32 ||
           ((t == GgmlType::Q8_0 || t == GgmlType::Q4_1) && head_dim % kvq::kGroup == 0);
  };
  return ok(kv.k_dtype) && ok(kv.v_dtype);
}

Status qk_norm_rope_kv(float* d_q, float* d_k, const float* d_v, const int32_t* d_pos, int64_t n_tok,
                       const QkRopeDev& p, const KvStoreDev& kv, Stream s) {
  STRATA_TRY(check_rope_args("qk_norm_rope_kv", d_q, d_k, d_pos, n_tok, p));
  if (!d_v) return Status::error("qk_norm_rope_kv: null V rows");
  STRATA_TRY(detail::check_kv("qk_norm_rope_kv", kv));
  if (!qk_norm_rope_kv_applies(kv, p.head_dim))
    return Status::error("qk_norm_rope_kv: KV dtypes {} / {} with head_dim {} unsupported", uint32_t(kv.k_dtype),
                         uint32_t(kv.v_dtype), p.head_dim);
  if (n_tok == 0) return Status::ok();
  const dim3 grid(unsigned(n_tok), unsigned((p.n_head + 2 * p.n_head_kv + kWarps - 1) / kWarps));
  detail::launch_pdl(detail::small_kernel_pdl(), qk_norm_rope_kernel, grid, dim3(kWarps * 32), 0,
                     static_cast<cudaStream_t>(s), d_q, d_k, d_pos, p, double(p.base), d_v, true, kv);
  return detail::launch_status("qk_norm_rope_kv");
}

}  // namespace strata::kernels::cuda
