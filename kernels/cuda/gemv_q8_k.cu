// Int8-activation GEMV instantiations for the K types q2_K q3_K q4_K q5_K q6_K (gemv_q8.cuh).
#include "kernels/cuda/gemv_q8.cuh"

namespace strata::kernels::cuda::detail {

bool launch_gemv_q8_k(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::Q2_K: launch_gemv_q8<UnitQ2_K>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q3_K: launch_gemv_q8<UnitQ3_K>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q4_K: launch_gemv_q8<UnitQ4_K>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q5_K: launch_gemv_q8<UnitQ5_K>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q6_K: launch_gemv_q8<UnitQ6_K>(w, x, n_cols, d_y, s); return true;
    default: return false;
  }
}

}  // namespace strata::kernels::cuda::detail
