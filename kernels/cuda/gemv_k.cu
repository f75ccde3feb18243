// GEMV instantiations for the K types q2_K q3_K q4_K q5_K q6_K (gemv_impl.cuh).
#include "kernels/cuda/gemv_impl.cuh"

namespace strata::kernels::cuda::detail {

bool launch_gemv_k(const WeightView& w, const float* d_x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::Q2_K: launch_gemv<DecQ2_K>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::Q3_K: launch_gemv<DecQ3_K>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::Q4_K: launch_gemv<DecQ4_K>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::Q5_K: launch_gemv<DecQ5_K>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::Q6_K: launch_gemv<DecQ6_K>(w, d_x, n_cols, d_y, s); return true;
    default: return false;
  }
}

}  // namespace strata::kernels::cuda::detail
