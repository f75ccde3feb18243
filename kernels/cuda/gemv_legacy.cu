// GEMV instantiations for the 32-element block types q4_0 q4_1 q5_0 q5_1 q8_0 (gemv_impl.cuh).
#include "kernels/cuda/gemv_impl.cuh"

namespace strata::kernels::cuda::detail {

bool launch_gemv_legacy(const WeightView& w, const float* d_x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::Q4_0: launch_gemv<DecQ4_0>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::Q4_1: launch_gemv<DecQ4_1>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::Q5_0: launch_gemv<DecQ5_0>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::Q5_1: launch_gemv<DecQ5_1>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::Q8_0: launch_gemv<DecQ8_0>(w, d_x, n_cols, d_y, s); return true;
    default: return false;
  }
}

}  // namespace strata::kernels::cuda::detail
