// Instantiations of the GPU-layout GEMV and dequantiser for the i-quants (gemv_gpu_iq.cuh readers):
// IQ3_XXS, IQ3_S, IQ4_XS, IQ4_NL. Apart from gemv_gpu.cu to bound its compile time.
#include "kernels/cuda/gemv_gpu_iq.cuh"
#include "kernels/cuda/gemv_gpu_launch.cuh"

namespace strata::kernels::cuda::detail {
namespace {

template <typename Out>
bool dispatch_dequant_iq(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale, Out* out,
                         cudaStream_t s) {
  switch (w.type) {
    case GgmlType::IQ3_XXS: launch_dequant<GpuIq3XXS>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::IQ3_S: launch_dequant<GpuIq3S>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::IQ4_XS: launch_dequant<GpuIq4XS>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::IQ4_NL: launch_dequant<GpuIq4NL>(w, row0, ids, n_rows, scale, out, s); return true;
    default: return false;
  }
}

}  // namespace

bool launch_gemv_gpu_iq(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::IQ3_XXS: launch<GpuIq3XXS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ3_S: launch<GpuIq3S>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ4_XS: launch<GpuIq4XS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ4_NL: launch<GpuIq4NL>(w, x, n_cols, d_y, s); return true;
    default: return false;
  }
}

bool launch_dequant_gpu_iq(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale,
                           float* d_out, cudaStream_t s) {
  return dispatch_dequant_iq(w, row0, ids, n_rows, scale, d_out, s);
}
bool launch_dequant_gpu_iq(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale,
                           __half* d_out, cudaStream_t s) {
  return dispatch_dequant_iq(w, row0, ids, n_rows, scale, d_out, s);
}

}  // namespace strata::kernels::cuda::detail
