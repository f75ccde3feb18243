// The FFN's gated activations, one element: act(gate) * up. Shared by the element-wise kernels
// (ops.cu) and the fused gate/up GEMV (gemv_gated.cu), so that both give the same bits.
// The accurate expf/tanhf (a few ulp from the host's libm). CUDA only.
#pragma once

#include <cuda_runtime.h>

namespace strata::kernels::cuda::detail {

__device__ __forceinline__ float silu_mul1(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}
__device__ __forceinline__ float gelu_tanh_mul1(float g, float u) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
}

}  // namespace strata::kernels::cuda::detail
