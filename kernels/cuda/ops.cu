// Element-wise and per-vector CUDA ops: the semantics of kernels/cpu/ops.h, launched on the given
// stream. Arguments are validated here (the boundary); kernels trust them.
//
// Exactness versus the CPU reference:
// - rms_norm: norm.cu.
// - rope computes each angle in double (inv_freq = base^(-2i/hd) by double pow, then pos * inv_freq
//   / freq_div, then double sin/cos rounded to f32), as the CPU does: positions up to 128K keep
//   their low bits. The angle is computed once per (token, pair) and applied to every head.
// - silu/gelu use the accurate expf/tanhf (a few ulp from the host's libm).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/act_round.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/gated_act.cuh"
#include "kernels/cuda/matmul_internal.h"
#include "kernels/cuda/pdl_launch.cuh"

namespace strata::kernels::cuda {
namespace {

using detail::launch_status;

cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 65535 * 16 ? blocks : 65535 * 16);  // grid-stride loops cover the rest
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

using detail::gelu_tanh_mul1;
using detail::silu_mul1;

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

// The same, and the result's int8 rounding (act_round.h): float4 per lane, so eight lanes hold a
// 32-element block; whole warps loop (round_store4 shuffles), lanes past the end hold zeros.
template <float (*F)(float, float)>
__global__ void gated_mul_round_kernel(float* gate, const float* __restrict__ up, int64_t n, ActRounding r) {
  detail::pdl_wait();                // where launched early (pdl_launch.cuh): gate is the GEMV's
  detail::pdl_launch_dependents();  // the down GEMV after it may start loading weights
  const int64_t n4 = n / 4, stride = int64_t(gridDim.x) * blockDim.x;
  float4* g4 = reinterpret_cast<float4*>(gate);
  const float4* u4 = reinterpret_cast<const float4*>(up);
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int64_t w0 = blockIdx.x * int64_t(blockDim.x) + (threadIdx.x & ~31u); w0 < n4; w0 += stride) {
    const int64_t i = w0 + (threadIdx.x & 31);
    const bool in = i < n4;
    float4 g = zero;
    if (in) {
      g = g4[i];
      const float4 u = u4[i];
      g.x = F(g.x, u.x), g.y = F(g.y, u.y), g.z = F(g.z, u.z), g.w = F(g.w, u.w);
      g4[i] = g;
    }
    detail::round_store4(g, 4 * i, in, r);
  }
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

Status gated_act_round(bool gelu, float* d_gate, const float* d_up, int64_t n, const ActRounding& r, Stream s) {
  const char* op = gelu ? "gelu_tanh_mul" : "silu_mul";
  if (!d_gate || !d_up) return Status::error("{}: null pointer", op);
  if (n < 0) return Status::error("{}: bad length {}", op, n);
  if (!r.q || n % 32 != 0 || !vec4_ok(d_gate, d_up, n)) {
    STRATA_TRY(gelu ? gelu_tanh_mul(d_gate, d_up, n, s) : silu_mul(d_gate, d_up, n, s));
    return r.q && n > 0 ? round_act(d_gate, n, r, s) : Status::ok();
  }
  if (n == 0) return Status::ok();
  const unsigned grid = grid_for(n / 4, 256);
  auto* kernel = gelu ? gated_mul_round_kernel<gelu_tanh_mul1> : gated_mul_round_kernel<silu_mul1>;
  detail::launch_pdl(detail::small_kernel_pdl(), kernel, dim3(grid), dim3(256), 0, as_stream(s), d_gate, d_up, n, r);
  return launch_status(op);
}

Status add(float* d_x, const float* d_y, int64_t n, Stream s) {
  if (!d_x || !d_y) return Status::error("add: null pointer");
  if (n < 0) return Status::error("add: bad length {}", n);
  if (n == 0) return Status::ok();
  add_kernel<<<grid_for(n, 256), 256, 0, as_stream(s)>>>(d_x, d_y, n);
  return launch_status("add");
}

}  // namespace strata::kernels::cuda
