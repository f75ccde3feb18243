// Instantiations of the GPU-layout GEMV and dequantiser (gemv_gpu.cuh) for q3_K q4_K q5_K q6_K q8_0.
#include <atomic>

#include "kernels/cuda/gemv_gpu_mma.cuh"

namespace strata::kernels::cuda {
namespace {
std::atomic<int> g_mma_min_cols{kGemvMmaFromCols};
std::atomic<bool> g_pdl{false};
}  // namespace
void set_gemv_mma_min_cols(int n) { g_mma_min_cols.store(n < 1 ? 1 : n); }
void set_gemv_pdl(bool on) {
  int dev = 0, major = 0;
  const bool sm90 = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
  g_pdl.store(on && sm90);
}
}  // namespace strata::kernels::cuda

namespace strata::kernels::cuda::detail {
namespace {

// A launch, with programmatic dependent launch when set_gemv_pdl is on (the kernels pdl_wait()
// before they read x). Errors are left for cudaGetLastError, as a <<<>>> launch leaves them.
template <class... P, class... A>
void launch_kernel(void (*kernel)(P...), unsigned grid, cudaStream_t s, A... args) {
  if (!g_pdl.load(std::memory_order_relaxed)) {
    kernel<<<grid, kGpuGemvWarps * 32, 0, s>>>(args...);
    return;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(kGpuGemvWarps * 32);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  (void)cudaLaunchKernelEx(&cfg, kernel, args...);
}

template <class D, int NC>
void launch_nc(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s) {
  const unsigned grid = unsigned((w.n_out + 7) / 8);
  launch_kernel(gemv_gpu_kernel<D, NC>, grid, s, w.data, w.n_in, w.n_out, x, n_cols, d_y,
                g_pdl.load(std::memory_order_relaxed));
}

// The MMA kernel compiled for 1, 2, 8, 16, 32 or 64 columns (the smallest that holds n_cols).
template <class D>
void launch_mma(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s) {
  const unsigned grid = unsigned(((w.n_out + 7) / 8 + 1) / 2);
  static_assert(kGpuMmaWarps == kGpuGemvWarps);
  auto go = [&](auto nc) {
    launch_kernel(gemv_gpu_mma_kernel<D, decltype(nc)::value>, grid, s, w.data, w.n_in, w.n_out, x, n_cols, d_y);
  };
  if (n_cols <= 1) go(std::integral_constant<int, 1>{});
  else if (n_cols <= 2) go(std::integral_constant<int, 2>{});
  else if (n_cols <= 8) go(std::integral_constant<int, 8>{});
  else if (n_cols <= 16) go(std::integral_constant<int, 16>{});
  else if (n_cols <= 32) go(std::integral_constant<int, 32>{});
  else go(std::integral_constant<int, 64>{});
}

template <class D>
void launch(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s) {
  // The dp4a kernel holds at most kMaxGemvCols (16) columns.
  if (n_cols >= g_mma_min_cols.load(std::memory_order_relaxed) || n_cols > kMaxGemvCols)
    return launch_mma<D>(w, x, n_cols, d_y, s);
  with_column_tile(n_cols, [&](auto nc) { launch_nc<D, decltype(nc)::value>(w, x, n_cols, d_y, s); });
}

template <class D, typename Out>
void launch_dequant(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale, Out* out,
                    cudaStream_t s) {
  const int64_t n = n_rows * (w.n_in / D::kChunk) * 4;
  constexpr int kThreads = 256;
  dequant_gpu_kernel<D, Out><<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, s>>>(w.data, w.n_in, row0, ids,
                                                                                         n_rows, scale, out);
}

template <typename Out>
bool dispatch_dequant(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale, Out* out,
                      cudaStream_t s) {
  switch (w.type) {
    case GgmlType::Q3_K: launch_dequant<GpuQ3K>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::Q4_K: launch_dequant<GpuQ4K>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::Q5_K: launch_dequant<GpuQ5K>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::Q6_K: launch_dequant<GpuQ6K>(w, row0, ids, n_rows, scale, out, s); return true;
    case GgmlType::Q8_0: launch_dequant<GpuQ8_0>(w, row0, ids, n_rows, scale, out, s); return true;
    default: return false;
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
    default: return false;
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
