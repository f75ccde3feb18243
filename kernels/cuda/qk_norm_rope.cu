// QK-norm and RoPE of every Q and K head in one launch (cuda_api.h qk_norm_rope): a decode step
// used to spend four launches here (norm Q, norm K, rope Q, rope K), each a few microseconds of
// mostly launch and memory latency for a few KiB of data.
//
// Grid (token, group of kWarps heads); warp w of a block takes one head of Q or K (Q heads first):
// it loads the head into its shared row, sums x^2 in double (each lane its elements in order, then
// a fixed xor-shuffle tree), scales by inv = 1 / sqrt(mean + eps) and the weight with
// non-contracted multiplies (rms_norm's roundings: only the order of the double sum differs),
// then rotates the pairs with the angles the block computed as rope() computes them (double pow
// and sincos per pair, rounded to f32) and writes the head back.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"

namespace strata::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxHeadDim = 512;

__global__ void __launch_bounds__(kWarps * 32)
    qk_norm_rope_kernel(float* q, float* k, const int32_t* __restrict__ pos, QkRopeDev p, double base) {
  const int64_t t = blockIdx.x, hd = p.head_dim, half = hd / 2;
  __shared__ float cs[kMaxHeadDim / 2], sn[kMaxHeadDim / 2];
  __shared__ float row[kWarps][kMaxHeadDim];
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const float ps = float(pos[t]) / p.linear_scale;  // as the CPU forward: float(pos) / lin
    double theta = double(ps) * pow(base, -2.0 * double(i) / double(hd));
    if (p.freq_div) theta /= double(p.freq_div[i]);
    double sd, cd;
    sincos(theta, &sd, &cd);
    cs[i] = float(cd), sn[i] = float(sd);
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t h = int64_t(blockIdx.y) * kWarps + warp;
  if (h >= p.n_head + p.n_head_kv) return;
  const bool is_q = h < p.n_head;
  float* v = is_q ? q + (t * p.n_head + h) * hd : k + (t * p.n_head_kv + (h - p.n_head)) * hd;
  const float* wn = is_q ? p.q_norm : p.k_norm;
  float* r = row[warp];
  if (wn) {
    double ss = 0;
    for (int64_t i = lane; i < hd; i += 32) {
      const float x = v[i];
      r[i] = x;
      ss += double(x) * double(x);
    }
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float inv = float(1.0 / sqrt(ss / double(hd) + double(p.eps)));
    for (int64_t i = lane; i < hd; i += 32) r[i] = __fmul_rn(__fmul_rn(r[i], inv), wn[i]);
  } else {
    for (int64_t i = lane; i < hd; i += 32) r[i] = v[i];
  }
  __syncwarp();
  for (int64_t i = lane; i < half; i += 32) {
    const int64_t ia = p.neox ? i : 2 * i, ib = p.neox ? i + half : 2 * i + 1;
    const float x0 = r[ia], x1 = r[ib], c = cs[i], s = sn[i];
    v[ia] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    v[ib] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

}  // namespace

Status qk_norm_rope(float* d_q, float* d_k, const int32_t* d_pos, int64_t n_tok, const QkRopeDev& p, Stream s) {
  if (!d_q || !d_k || !d_pos) return Status::error("qk_norm_rope: null pointer");
  if (n_tok < 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0 || p.head_dim % 2 != 0 ||
      p.head_dim > kMaxHeadDim) {
    return Status::error("qk_norm_rope: bad shape (n_tok {}, n_head {}, n_head_kv {}, head_dim {})", n_tok, p.n_head,
                         p.n_head_kv, p.head_dim);
  }
  if (!(p.base > 0) || !(p.linear_scale > 0))
    return Status::error("qk_norm_rope: bad base {} or linear scale {}", p.base, p.linear_scale);
  if (n_tok == 0) return Status::ok();
  if (n_tok > 0x7fffffff) return Status::error("qk_norm_rope: too many tokens ({})", n_tok);
  const dim3 grid(unsigned(n_tok), unsigned((p.n_head + p.n_head_kv + kWarps - 1) / kWarps));
  qk_norm_rope_kernel<<<grid, kWarps * 32, 0, static_cast<cudaStream_t>(s)>>>(d_q, d_k, d_pos, p, double(p.base));
  return detail::launch_status("qk_norm_rope");
}

}  // namespace strata::kernels::cuda
