// GEMV instantiations for the float types f32 f16 bf16 (gemv_impl.cuh): 8-element vector loads
// when rows and x are 16-byte aligned and n_in is a multiple of 8, else element by element.
#include "kernels/cuda/gemv_impl.cuh"

namespace strata::kernels::cuda::detail {

bool launch_gemv_float(const WeightView& w, bool piece8, const float* d_x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::F32:
      piece8 ? launch_gemv<DecF32<8>>(w, d_x, n_cols, d_y, s) : launch_gemv<DecF32<1>>(w, d_x, n_cols, d_y, s);
      return true;
    case GgmlType::F16:
      piece8 ? launch_gemv<DecHalf<8, false>>(w, d_x, n_cols, d_y, s)
             : launch_gemv<DecHalf<1, false>>(w, d_x, n_cols, d_y, s);
      return true;
    case GgmlType::BF16:
      piece8 ? launch_gemv<DecHalf<8, true>>(w, d_x, n_cols, d_y, s)
             : launch_gemv<DecHalf<1, true>>(w, d_x, n_cols, d_y, s);
      return true;
    default: return false;
  }
}

}  // namespace strata::kernels::cuda::detail
