// Instantiations of the GPU-layout GEMV and dequantiser (gemv_gpu.cuh) for q3_K q4_K q5_K q6_K q8_0
// (the i-quants: gemv_gpu_iq.cu), and the settings of gemv_tuning.h.
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "kernels/cuda/gemv_gpu_launch.cuh"

namespace strata::kernels::cuda {
namespace {
std::atomic<int> g_mma_min_cols{kGemvMmaFromCols};
std::atomic<bool> g_pdl{false};
std::atomic<int> g_warps{[] {
  const char* env = std::getenv("STRATA_GEMV_WARPS");
  return env ? std::atoi(env) : 0;
}()};
std::atomic<int> g_mma_persist_from{[] {
  const char* env = std::getenv("STRATA_GEMV_MMA_PERSIST");
  return env ? std::max(0, std::atoi(env)) : 0;
}()};
}  // namespace
void set_gemv_warps(int warps) { g_warps.store(warps == 8 || warps == 16 ? warps : 0); }
void set_gemv_mma_persist_from(int n_cols) { g_mma_persist_from.store(std::max(0, n_cols)); }
void set_gemv_mma_min_cols(int n) { g_mma_min_cols.store(n < 1 ? 1 : n); }
void set_gemv_pdl(bool on) {
  int dev = 0, major = 0;
  const bool sm90 = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
  g_pdl.store(on && sm90);
}
}  // namespace strata::kernels::cuda

namespace strata::kernels::cuda::detail {
int gpu_gemv_mma_min_cols() { return g_mma_min_cols.load(std::memory_order_relaxed); }
bool gpu_gemv_pdl() { return g_pdl.load(std::memory_order_relaxed); }
bool small_kernel_pdl() {
  static const bool on = [] {
    const char* env = std::getenv("STRATA_SMALL_PDL");
    return env && env[0] == '1';
  }();
  return on && gpu_gemv_pdl();
}
int gpu_gemv_mma_persist_from() { return g_mma_persist_from.load(std::memory_order_relaxed); }
int gpu_gemv_forced_warps() { return g_warps.load(std::memory_order_relaxed); }
namespace {

template <typename Out>
bool dispatch_dequant(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale, Out* out,
                      cudaStream_t s) {
  switch (w.type) {
    case GgmlType::Q3_K: launch_dequant<GpuQ3K>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::Q4_K: launch_dequant<GpuQ4K>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::Q5_K: launch_dequant<GpuQ5K>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::Q6_K: launch_dequant<GpuQ6K>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::Q8_0: launch_dequant<GpuQ8_0>(w, row0, ids, n_rows, scale, out, s); return true;
    default: return launch_dequant_gpu_iq(w, row0, ids, n_rows, scale, out, s);
  }
}

}  // namespace

bool launch_gemv_gpu(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::Q3_K: launch<GpuQ3K>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q4_K: launch<GpuQ4K>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q5_K: launch<GpuQ5K>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q6_K: launch<GpuQ6K>(w, x, n_cols, d_y, s); return true;
    case GgmlType::Q8_0: launch<GpuQ8_0>(w, x, n_cols, d_y, s); return true;
    default: return launch_gemv_gpu_iq(w, x, n_cols, d_y, s);
  }
}

bool launch_dequant_gpu_f32(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale,
                            float* d_out, cudaStream_t s) {
  return dispatch_dequant(w, row0, ids, n_rows, scale, d_out, s);
}
bool launch_dequant_gpu_f16(const WeightView& w, int64_t row0, int64_t n_rows, void* d_out, cudaStream_t s) {
  return dispatch_dequant(w, row0, nullptr, n_rows, 1.0f, static_cast<__half*>(d_out), s);
}

}  // namespace strata::kernels::cuda::detail
