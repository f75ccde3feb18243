// Instantiations of the GPU-layout GEMV and dequantiser (gemv_gpu.cuh) for q3_K q4_K q5_K q6_K q8_0.
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "kernels/cuda/gemv_gpu_mma.cuh"
#include "kernels/cuda/gemv_tuning.h"

namespace strata::kernels::cuda {
namespace {
std::atomic<int> g_mma_min_cols{kGemvMmaFromCols};
std::atomic<bool> g_pdl{false};
std::atomic<int> g_warps{[] {
  const char* env = std::getenv("STRATA_GEMV_WARPS");
  return env ? std::atoi(env) : 0;
}()};
}  // namespace
void set_gemv_warps(int warps) { g_warps.store(warps == 8 || warps == 16 ? warps : 0); }
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
void launch_kernel(void (*kernel)(P...), unsigned grid, unsigned block, cudaStream_t s, A... args) {
  if (!g_pdl.load(std::memory_order_relaxed)) {
    kernel<<<grid, block, 0, s>>>(args...);
    return;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  (void)cudaLaunchKernelEx(&cfg, kernel, args...);
}

// Streaming multiprocessors of the current device (cached per device ordinal).
int sm_count() {
  static std::atomic<int> cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  int n = cached[dev].load(std::memory_order_relaxed);
  if (n == 0 && cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess) cached[dev].store(n);
  return n;
}

// Warps per CTA for a matrix (gemv_gpu.cuh W): the count that finishes the dp4a kernel's CTAs in
// fewer chunk-steps, counting whole waves (32 warps per SM: 4 CTAs of 8 or 2 of 16) times the
// chunks the busiest warp of a CTA takes. 16 wins where 8-warp CTAs leave a mostly empty last wave
// (a 27B's attention output and FFN down: 672 CTAs on 132 SMs' 528 slots) or few CTAs for the GPU
// (K, V). A function of the shape and the device only, so every column count sums alike.
int gemv_warps(int64_t n_chunks, int64_t n_groups) {
  const int64_t sms = std::max(sm_count(), 1);
  auto steps = [&](int64_t warps) {
    const int64_t slots = sms * (32 / warps);
    return (n_groups + slots - 1) / slots * ((n_chunks + warps - 1) / warps);
  };
  return steps(16) < steps(8) ? 16 : 8;
}

// set_gemv_warps (gemv_tuning.h) forces one. q8_0 (32-element chunks) stays at 8: its many short
// chunks per warp ran slower split 16 ways (27B FFN down on the H200: 57% of read against 60%),
// where the K types' down gained 4-6 points.
int gemv_warps(const WeightView& w, int chunk) {
  const int forced = g_warps.load(std::memory_order_relaxed);
  return forced != 0 ? forced : chunk < 256 ? 8 : gemv_warps(w.n_in / chunk, (w.n_out + 7) / 8);
}

template <class D, int NC>
void launch_nc(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s) {
  const unsigned grid = unsigned((w.n_out + 7) / 8);
  const bool pdl = g_pdl.load(std::memory_order_relaxed);
  if (gemv_warps(w, D::kChunk) == 16)
    launch_kernel(gemv_gpu_kernel<D, NC, 16>, grid, 16 * 32, s, w.data, w.n_in, w.n_out, x, n_cols, d_y, pdl);
  else launch_kernel(gemv_gpu_kernel<D, NC, 8>, grid, 8 * 32, s, w.data, w.n_in, w.n_out, x, n_cols, d_y, pdl);
}

// The MMA kernel compiled for 1, 2, 8, 16, 32 or 64 columns (the smallest that holds n_cols).
template <class D>
void launch_mma(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s) {
  const unsigned grid = unsigned(((w.n_out + 7) / 8 + 1) / 2);
  const bool w16 = gemv_warps(w, D::kChunk) == 16;
  auto go = [&](auto nc) {
    constexpr int NC = decltype(nc)::value;
    if (w16) launch_kernel(gemv_gpu_mma_kernel<D, NC, 16>, grid, 16 * 32, s, w.data, w.n_in, w.n_out, x, n_cols, d_y);
    else launch_kernel(gemv_gpu_mma_kernel<D, NC, 8>, grid, 8 * 32, s, w.data, w.n_in, w.n_out, x, n_cols, d_y);
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
