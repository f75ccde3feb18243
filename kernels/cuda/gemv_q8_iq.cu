// Int8-activation GEMV instantiations for the i-quants (gemv_q8.cuh over iq_decode.cuh's UnitIq):
// one 32-element sub-block per lane and step, each decoded once for all columns.
#include "kernels/cuda/gemv_q8.cuh"
#include "kernels/cuda/iq_decode.cuh"

namespace strata::kernels::cuda::detail {

bool launch_gemv_q8_iq(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::IQ4_NL: launch_gemv_q8<UnitIq<IqIq4_NL>>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ4_XS: launch_gemv_q8<UnitIq<IqIq4_XS>>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ3_XXS: launch_gemv_q8<UnitIq<IqIq3_XXS>>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ3_S: launch_gemv_q8<UnitIq<IqIq3_S>>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_XXS: launch_gemv_q8<UnitIq<IqIq2_XXS>>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_XS: launch_gemv_q8<UnitIq<IqIq2_XS>>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_S: launch_gemv_q8<UnitIq<IqIq2_S>>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ1_S: launch_gemv_q8<UnitIq<IqIq1_S>>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ1_M: launch_gemv_q8<UnitIq<IqIq1_M>>(w, x, n_cols, d_y, s); return true;
    default: return false;
  }
}

}  // namespace strata::kernels::cuda::detail
