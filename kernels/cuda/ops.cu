// Element-wise and per-vector CUDA ops: the semantics of kernels/cpu/ops.h, launched on the given
// stream. Arguments are validated here (the boundary); kernels trust them.
//
// Exactness versus the CPU reference:
// - rms_norm accumulates sum(x^2) in double (as the CPU does) and applies (x * inv) * w with
//   non-contracted multiplies: results differ from the CPU only by the order of the double sum.
// - rope computes each angle in double (inv_freq = base^(-2i/hd) by double pow, then pos * inv_freq
//   / freq_div, then double sin/cos rounded to f32), as the CPU does: positions up to 128K keep
//   their low bits. The angle is computed once per (token, pair) and applied to every head.
// - silu/gelu use the accurate expf/tanhf (a few ulp from the host's libm).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"

namespace strata::kernels::cuda {
namespace {

using detail::launch_status;

cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 65535 * 16 ? blocks : 65535 * 16);  // grid-stride loops cover the rest
}

constexpr int kNormThreads = 256;

// ---- rms_norm: one block per vector ----
// Decode normalises one 5376-wide vector at a time, so one block must finish it in about one
// memory round trip: float4 loads, unrolled so that a thread's loads are all in flight before the
// (double) sum needs them, and 1024 threads when there are few vectors (a 256-thread block with a
// load-then-add loop took ~16 us per vector: 21 dependent round trips).

// kAdd: out += the normalised vector (post-norm + residual add: the roundings of rms_norm into a
// buffer followed by add, in one kernel); out must not alias x then.
template <bool kVec4, bool kAdd = false>
__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, int64_t n, float eps,
                                float* out) {
  const float* xv = x + int64_t(blockIdx.x) * n;
  float* ov = out + int64_t(blockIdx.x) * n;
  double ss = 0;
  if constexpr (kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(xv);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      const float4 v = x4[i];
      ss += double(v.x) * double(v.x) + double(v.y) * double(v.y) + double(v.z) * double(v.z) +
            double(v.w) * double(v.w);
    }
  } else {
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += double(xv[i]) * double(xv[i]);
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  __shared__ double warp_sums[32];
  __shared__ float inv_s;
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (int i = 0; i < int(blockDim.x >> 5); ++i) t += warp_sums[i];
    inv_s = float(1.0 / sqrt(t / double(n) + double(eps)));
  }
  __syncthreads();
  const float inv = inv_s;
  // out may alias x: every read of x above happened before the barrier.
  if constexpr (kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(xv);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* o4 = reinterpret_cast<float4*>(ov);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      const float4 v = x4[i];
      float4 r = make_float4(__fmul_rn(v.x, inv), __fmul_rn(v.y, inv), __fmul_rn(v.z, inv), __fmul_rn(v.w, inv));
      if (w) {
        const float4 g = w4[i];
        r = make_float4(__fmul_rn(r.x, g.x), __fmul_rn(r.y, g.y), __fmul_rn(r.z, g.z), __fmul_rn(r.w, g.w));
      }
      if constexpr (kAdd) {
        const float4 o = o4[i];
        r = make_float4(__fadd_rn(o.x, r.x), __fadd_rn(o.y, r.y), __fadd_rn(o.z, r.z), __fadd_rn(o.w, r.w));
      }
      o4[i] = r;
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float r = w ? __fmul_rn(__fmul_rn(xv[i], inv), w[i]) : __fmul_rn(xv[i], inv);
      ov[i] = kAdd ? __fadd_rn(ov[i], r) : r;
    }
  }
}

template <bool kAdd>
Status launch_rms_norm(const char* op, const float* d_x, const float* d_w, int64_t n_vec, int64_t n, float eps,
                       float* d_out, Stream s) {
  if (!d_x || !d_out) return Status::error("{}: null pointer", op);
  if (n_vec < 0 || n <= 0) return Status::error("{}: bad shape (n_vec {}, n {})", op, n_vec, n);
  if (n_vec == 0) return Status::ok();
  if (n_vec > 0x7fffffff) return Status::error("{}: too many vectors ({})", op, n_vec);
  const unsigned threads = n_vec < 64 && n >= 4096 ? 1024 : kNormThreads;
  const bool vec4 = n % 4 == 0 && reinterpret_cast<uintptr_t>(d_x) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(d_out) % 16 == 0 && reinterpret_cast<uintptr_t>(d_w) % 16 == 0;
  if (vec4) rms_norm_kernel<true, kAdd><<<unsigned(n_vec), threads, 0, as_stream(s)>>>(d_x, d_w, n, eps, d_out);
  else rms_norm_kernel<false, kAdd><<<unsigned(n_vec), threads, 0, as_stream(s)>>>(d_x, d_w, n, eps, d_out);
  return launch_status(op);
}

// ---- rope: one block per token; each (pair) angle once, in shared memory, then every head ----
// The angle needs a double pow and sincos: computed once per (token, pair) by the first half_dim
// threads, then all threads rotate (head, pair) elements in parallel (a thread looping over the
// heads made ~n_heads dependent memory round trips: ~8.5 us per decode call).

constexpr int kRopeThreads = 256;
constexpr int kRopeMaxHalf = 512;  // head_dim <= 1024 (rope() checks)

__global__ void rope_kernel(float* x, const int32_t* __restrict__ pos, int64_t n_heads, int64_t head_dim,
                            double base, float linear_scale, const float* __restrict__ freq_div, bool neox) {
  const int64_t half = head_dim / 2, t = blockIdx.x;
  __shared__ float cs[kRopeMaxHalf], sn[kRopeMaxHalf];
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const float p = float(pos[t]) / linear_scale;  // as the CPU forward: float(pos) / lin
    double theta = double(p) * pow(base, -2.0 * double(i) / double(head_dim));
    if (freq_div) theta /= double(freq_div[i]);
    double sd, cd;
    sincos(theta, &sd, &cd);
    cs[i] = float(cd), sn[i] = float(sd);
  }
  __syncthreads();
  float* xt = x + t * n_heads * head_dim;
  for (int64_t idx = threadIdx.x; idx < n_heads * half; idx += blockDim.x) {
    const int64_t h = idx / half, i = idx % half;
    float* v = xt + h * head_dim;
    float* a = neox ? &v[i] : &v[2 * i];
    float* b = neox ? &v[i + half] : &v[2 * i + 1];
    const float x0 = *a, x1 = *b, c = cs[i], s = sn[i];
    *a = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    *b = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

// ---- gated activations and add ----

__device__ __forceinline__ float silu_mul1(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}
__device__ __forceinline__ float gelu_tanh_mul1(float g, float u) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
}

// gate[i] = f(gate[i], up[i]); four elements per 16-byte load where both are 16-byte aligned (a
// 4096-token prefill chunk's FFN is 88M elements: scalar loads reached ~half of device read). The
// same per-element arithmetic either way.
template <float (*F)(float, float)>
__global__ void gated_mul_kernel(float* gate, const float* __restrict__ up, int64_t n, bool vec4) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (vec4) {
    float4* g4 = reinterpret_cast<float4*>(gate);
    const float4* u4 = reinterpret_cast<const float4*>(up);
    for (; i < n / 4; i += stride) {
      float4 g = g4[i];
      const float4 u = u4[i];
      g.x = F(g.x, u.x), g.y = F(g.y, u.y), g.z = F(g.z, u.z), g.w = F(g.w, u.w);
      g4[i] = g;
    }
    return;
  }
  for (; i < n; i += stride) gate[i] = F(gate[i], up[i]);
}

bool vec4_ok(const float* a, const float* b, int64_t n) {
  return n % 4 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
}

__global__ void add_kernel(float* x, const float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

}  // namespace

Status rms_norm(const float* d_x, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_out, Stream s) {
  return launch_rms_norm<false>("rms_norm", d_x, d_w, n_vec, n, eps, d_out, s);
}

Status rms_norm_add(const float* d_h, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_x, Stream s) {
  if (d_h && d_h == d_x) return Status::error("rms_norm_add: the sum must not alias the normalised input");
  return launch_rms_norm<true>("rms_norm_add", d_h, d_w, n_vec, n, eps, d_x, s);
}

Status rope(float* d_x, const int32_t* d_pos, int64_t n_tok, int64_t n_heads, int64_t head_dim, float base,
            float linear_scale, const float* d_freq_div, bool neox, Stream s) {
  if (!d_x || !d_pos) return Status::error("rope: null pointer");
  if (n_tok < 0 || n_heads <= 0 || head_dim <= 0 || head_dim % 2 != 0 || head_dim > 2 * kRopeMaxHalf) {
    return Status::error("rope: bad shape (n_tok {}, n_heads {}, head_dim {})", n_tok, n_heads, head_dim);
  }
  if (!(base > 0) || !(linear_scale > 0)) return Status::error("rope: bad base {} or linear scale {}", base, linear_scale);
  if (n_tok == 0) return Status::ok();
  if (n_tok > 0x7fffffff) return Status::error("rope: too many tokens ({})", n_tok);
  rope_kernel<<<unsigned(n_tok), kRopeThreads, 0, as_stream(s)>>>(d_x, d_pos, n_heads, head_dim, double(base),
                                                                 linear_scale, d_freq_div, neox);
  return launch_status("rope");
}

Status silu_mul(float* d_gate, const float* d_up, int64_t n, Stream s) {
  if (!d_gate || !d_up) return Status::error("silu_mul: null pointer");
  if (n < 0) return Status::error("silu_mul: bad length {}", n);
  if (n == 0) return Status::ok();
  const bool v = vec4_ok(d_gate, d_up, n);
  gated_mul_kernel<silu_mul1><<<grid_for(v ? n / 4 : n, 256), 256, 0, as_stream(s)>>>(d_gate, d_up, n, v);
  return launch_status("silu_mul");
}

Status gelu_tanh_mul(float* d_gate, const float* d_up, int64_t n, Stream s) {
  if (!d_gate || !d_up) return Status::error("gelu_tanh_mul: null pointer");
  if (n < 0) return Status::error("gelu_tanh_mul: bad length {}", n);
  if (n == 0) return Status::ok();
  const bool v = vec4_ok(d_gate, d_up, n);
  gated_mul_kernel<gelu_tanh_mul1><<<grid_for(v ? n / 4 : n, 256), 256, 0, as_stream(s)>>>(d_gate, d_up, n, v);
  return launch_status("gelu_tanh_mul");
}

Status add(float* d_x, const float* d_y, int64_t n, Stream s) {
  if (!d_x || !d_y) return Status::error("add: null pointer");
  if (n < 0) return Status::error("add: bad length {}", n);
  if (n == 0) return Status::ok();
  add_kernel<<<grid_for(n, 256), 256, 0, as_stream(s)>>>(d_x, d_y, n);
  return launch_status("add");
}

}  // namespace strata::kernels::cuda
