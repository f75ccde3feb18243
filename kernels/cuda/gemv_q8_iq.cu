// Int8-activation GEMV instantiations for the i-quants (gemv_q8.cuh over iq_decode.cuh's UnitIq),
// each decoded sub-block used for all columns.
//
// Sub-blocks per lane step (UnitIq's kSubsPerUnit): 1 by default. STRATA_IQ_GEMV_SUBS=1|2|4
// overrides it for the 256-element types (read once per process): a tuning knob for `strata bench
// kernels`, not a setting (every value computes the same result). Measured on the H200 (bench
// kernels, ffn up 5376x21504, batch 1, 2026-12-02): IQ3_XXS 24% of device read at 1, 21% at 2, 14%
// at 4; IQ4_XS 33% at 1 and 2. All far from M13's 75%: see the M13 report for what was tried (a
// kernel with the grid in shared memory and R rows per warp sharing activation loads measured no
// better: 23% IQ3_XXS, commit f388778) and the GPU layout as the way on. IQ3_XXS, IQ3_S, IQ4_XS and
// IQ4_NL now have it (gemv_gpu_iq.cuh); this kernel serves the others and the GGUF-layout engines.
#include <cstdlib>

#include "kernels/cuda/gemv_q8.cuh"
#include "kernels/cuda/iq_decode.cuh"

namespace strata::kernels::cuda::detail {
namespace {

int iq_subs_per_unit() {
  static const int subs = [] {
    const char* e = std::getenv("STRATA_IQ_GEMV_SUBS");
    const int v = e ? std::atoi(e) : 1;
    return (v == 1 || v == 2 || v == 4) ? v : 1;
  }();
  return subs;
}

template <class T>
void launch_iq(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  switch (iq_subs_per_unit()) {
    case 2: launch_gemv_q8<UnitIq<T, 2>>(w, x, n_cols, d_y, s); break;
    case 4: launch_gemv_q8<UnitIq<T, 4>>(w, x, n_cols, d_y, s); break;
    default: launch_gemv_q8<UnitIq<T, 1>>(w, x, n_cols, d_y, s); break;
  }
}

}  // namespace

bool launch_gemv_q8_iq(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::IQ4_NL: launch_gemv_q8<UnitIq<IqIq4_NL, 1>>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ4_XS: launch_iq<IqIq4_XS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ3_XXS: launch_iq<IqIq3_XXS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ3_S: launch_iq<IqIq3_S>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_XXS: launch_iq<IqIq2_XXS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_XS: launch_iq<IqIq2_XS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_S: launch_iq<IqIq2_S>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ1_S: launch_iq<IqIq1_S>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ1_M: launch_iq<IqIq1_M>(w, x, n_cols, d_y, s); return true;
    default: return false;
  }
}

}  // namespace strata::kernels::cuda::detail
