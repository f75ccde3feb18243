// GEMV instantiations for the i-quants with f32 activations (gemv_impl.cuh over iq_decode.cuh's
// DecIq): the path without a workspace. The engine's decode path is the int8 one (gemv_q8_iq.cu).
#include "kernels/cuda/gemv_impl.cuh"
#include "kernels/cuda/iq_decode.cuh"

namespace strata::kernels::cuda::detail {

bool launch_gemv_iq(const WeightView& w, const float* d_x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::IQ4_NL: launch_gemv<DecIq<IqIq4_NL>>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::IQ4_XS: launch_gemv<DecIq<IqIq4_XS>>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::IQ3_XXS: launch_gemv<DecIq<IqIq3_XXS>>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::IQ3_S: launch_gemv<DecIq<IqIq3_S>>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_XXS: launch_gemv<DecIq<IqIq2_XXS>>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_XS: launch_gemv<DecIq<IqIq2_XS>>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_S: launch_gemv<DecIq<IqIq2_S>>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::IQ1_S: launch_gemv<DecIq<IqIq1_S>>(w, d_x, n_cols, d_y, s); return true;
    case GgmlType::IQ1_M: launch_gemv<DecIq<IqIq1_M>>(w, d_x, n_cols, d_y, s); return true;
    default: return false;
  }
}

}  // namespace strata::kernels::cuda::detail
