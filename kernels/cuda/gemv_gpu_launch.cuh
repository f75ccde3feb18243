// Launchers of the GPU-layout GEMV and dequantiser (gemv_gpu.cuh, gemv_gpu_mma.cuh), shared by the
// instantiation files gemv_gpu.cu (K types, q8_0) and gemv_gpu_iq.cu (i-quants). CUDA only.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "kernels/cuda/gemv_gpu_mma.cuh"
#include "kernels/cuda/gemv_tuning.h"
#include "kernels/cuda/pdl_launch.cuh"

namespace strata::kernels::cuda::detail {

// The settings of gemv_tuning.h (gemv_gpu.cu holds them).
int gpu_gemv_mma_min_cols();
int gpu_gemv_forced_warps();
int gpu_gemv_mma_persist_from();  // set_gemv_mma_persist_from: from this many columns; 0: never
// The default dp4a variant of the table readers (iq_gemv_variant below).
inline constexpr int kIqGemvVariant = 0;
// The i-quants' instantiations (gemv_gpu_iq.cu); false when the type is not one of them.
bool launch_gemv_gpu_iq(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s);
bool launch_dequant_gpu_iq(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale,
                           float* d_out, cudaStream_t s);
bool launch_dequant_gpu_iq(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale,
                           __half* d_out, cudaStream_t s);

namespace {

// A launch, with programmatic dependent launch when set_gemv_pdl is on (the kernels pdl_wait()
// before they read x).
template <class... P, class... A>
void launch_kernel_smem(void (*kernel)(P...), unsigned grid, unsigned block, size_t smem, cudaStream_t s, A... args) {
  launch_pdl(gpu_gemv_pdl(), kernel, dim3(grid), dim3(block), smem, s, args...);
}
template <class... P, class... A>
void launch_kernel(void (*kernel)(P...), unsigned grid, unsigned block, cudaStream_t s, A... args) {
  launch_kernel_smem(kernel, grid, block, 0, s, args...);
}

// A device attribute of the current device, cached per device ordinal (0 where the query fails).
template <cudaDeviceAttr A>
int cached_device_attribute() {
  static std::atomic<int> cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  int n = cached[dev].load(std::memory_order_relaxed);
  if (n == 0 && cudaDeviceGetAttribute(&n, A, dev) == cudaSuccess) cached[dev].store(n);
  return n;
}
// Streaming multiprocessors, shared memory per SM, and the opt-in shared memory per CTA.
int sm_count() { return cached_device_attribute<cudaDevAttrMultiProcessorCount>(); }
int smem_per_sm() { return cached_device_attribute<cudaDevAttrMaxSharedMemoryPerMultiprocessor>(); }
int smem_per_block_optin() { return cached_device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(); }

// CTAs for `units` row groups (or MMA pairs): one each, or for table readers (HasTable) at most as
// many as the GPU holds at once -- kCtasPerSm (the kernel's launch bound) where the shared memory
// allows -- each of which fills its table once and loops over the units. (Device attributes only:
// no occupancy API, which a stream capture may refuse.)
template <class D, int kCtasPerSm>
unsigned grid_for(int64_t units, size_t other_smem_bytes) {
  if constexpr (!HasTable<D>::value) {
    return unsigned(units);
  } else {
    const size_t per_cta = size_t(D::kTableWords) * 4 + other_smem_bytes + 1024;  // 1 KiB: the system's share
    const int fit = int(size_t(std::max(smem_per_sm(), 1)) / per_cta);
    const int64_t ctas = int64_t(std::max(1, std::min(kCtasPerSm, fit))) * std::max(sm_count(), 1);
    return unsigned(std::min(units, ctas));
  }
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
  const int forced = gpu_gemv_forced_warps();
  return forced != 0 ? forced : chunk < 256 ? 8 : gemv_warps(w.n_in / chunk, (w.n_out + 7) / 8);
}

// The table readers' dp4a variant for 1-2 columns (gemv_gpu_kernel kMinBlocks, kPipe): 0 = the K
// types' kernel (4 CTAs of 8 warps per SM, 64 registers), 1 = the same pipelined, 2 = pipelined at
// 2 CTAs per SM (128 registers), 3 = tiles staged by cp.async, 3 ahead, across row groups
// (gemv_gpu_async_kernel; 0 where the SM's shared memory cannot hold it). STRATA_IQ_GEMV_VARIANT (read once per process)
// is a tuning knob for `strata bench kernels`, not a setting: every variant computes the same bits.
inline int iq_gemv_variant() {
  static const int v = [] {
    const char* e = std::getenv("STRATA_IQ_GEMV_VARIANT");
    const int n = e ? std::atoi(e) : kIqGemvVariant;
    return n >= 0 && n <= 3 ? n : kIqGemvVariant;
  }();
  return v;
}

// Sets the kernel's shared-memory carveout to its maximum once (table readers: 32 KiB per CTA, so
// that the launch bound's CTAs fit on an SM; the driver's own choice is only a hint otherwise).
template <auto kKernel>
void max_carveout() {
  static const bool once = [] {
    (void)cudaFuncSetAttribute(kKernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared));
    (void)cudaGetLastError();
    return true;
  }();
  (void)once;
}

// Lets the kernel take kBytes of dynamic shared memory (above the 48 KiB default), once.
template <auto kKernel, int kBytes>
void allow_dynamic_smem() {
  static const bool once = [] {
    (void)cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
    (void)cudaGetLastError();
    return true;
  }();
  (void)once;
}

template <class D, int NC, int W, int kMinBlocks, bool kPipe>
void launch_dp4a(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s, bool pdl) {
  constexpr auto kernel = gemv_gpu_kernel<D, NC, W, kMinBlocks, kPipe>;
  if constexpr (HasTable<D>::value) max_carveout<kernel>();
  launch_kernel(kernel, grid_for<D, kMinBlocks>((w.n_out + 7) / 8, W * NC * 8 * 4), W * 32, s, w.data, w.n_in,
                w.n_out, x, n_cols, d_y, pdl);
}

// STRATA_GEMV_ASYNC (read once per process): the K types' 1-2 column GEMV stages its tiles through
// shared memory (gemv_gpu_async_kernel); the same bits either way. 0: never; 1: every shape; 2 (the
// default): 8-warp shapes of more than two waves of CTAs (FFN gate/up, the head), where it wins.
// R: 4 tiles in flight per warp (dynamic shared memory, W * 4 tiles per CTA). Measured (H100, 27B
// Q3_K_M resident, bench decode, alternated pairs): 0: 131.6 / 131.5 tok/s; 2: 134.0 / 134.0 (2
// with the maximum carveout: 132.9 / 132.9); 1: 131.8 / 131.7. bench kernels, q3_K ffn up / head:
// 65 / 83% of read with 0, 69 / 95% with 1; it loses on the one-wave Q shape (43 -> 37%) and the
// 16-warp down shape (66 -> 61%).
inline int gemv_async_mode() {
  static const int mode = [] {
    const char* e = std::getenv("STRATA_GEMV_ASYNC");
    return e ? std::atoi(e) : 2;
  }();
  return mode;
}
template <class D, class = void>
struct LoadsFromSmem : std::false_type {};
template <class D>
struct LoadsFromSmem<D, std::void_t<decltype(std::declval<D&>().load_raw(SmemTile{nullptr}, 0, 0))>>
    : std::true_type {};
constexpr int kAsyncRing = 4;
// The table readers' ring: 3 tiles per warp, so that 4 CTAs of 8 warps (the launch bound) fit an
// H100/H200 SM with their 32 KiB tables (4 x (32 + 18.4 .. 20.6 + 1.3) KiB <= 228 KiB). Where they do
// not fit (an sm_86/89 SM has 100 KiB), the kernel without a ring runs instead.
constexpr int kAsyncRingTable = 3;
template <class D, int NC, int W>
bool launch_async(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s, bool pdl) {
  if constexpr (NC > 2 || !LoadsFromSmem<D>::value) {
    return false;
  } else {
    const int64_t groups = (w.n_out + 7) / 8;
    constexpr bool kTable = HasTable<D>::value;
    constexpr int R = kTable ? kAsyncRingTable : kAsyncRing;
    constexpr int kCtasPerSm = 4 * 8 / W;  // gemv_gpu_async_kernel's launch bound for 1-2 columns
    constexpr int kBytes = W * R * D::kTile;
    constexpr auto kernel = gemv_gpu_async_kernel<D, NC, W, R>;
    unsigned grid = unsigned(groups);
    if constexpr (kTable) {
      const size_t reduce = size_t(W) * NC * 8 * 4, table = size_t(D::kTableWords) * 4;
      if (size_t(smem_per_sm()) < kCtasPerSm * (table + reduce + kBytes + 1024) ||
          size_t(smem_per_block_optin()) < table + reduce + kBytes)
        return false;
      max_carveout<kernel>();
      grid = grid_for<D, kCtasPerSm>(groups, reduce + kBytes);
    } else {
      if (gemv_async_mode() == 2 && (W != 8 || groups <= int64_t(2) * 4 * std::max(sm_count(), 1))) return false;
      // STRATA_GEMV_ASYNC_CARVEOUT=1: ask for the maximum shared-memory carveout (slower: above).
      static const bool carve = [] {
        const char* e = std::getenv("STRATA_GEMV_ASYNC_CARVEOUT");
        return e && std::atoi(e) != 0;
      }();
      if (carve) max_carveout<kernel>();
    }
    allow_dynamic_smem<kernel, kBytes>();
    launch_kernel_smem(kernel, grid, W * 32, kBytes, s, w.data, w.n_in, w.n_out, x, n_cols, d_y, pdl);
    return true;
  }
}

template <class D, int NC>
void launch_nc(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s) {
  const int64_t groups = (w.n_out + 7) / 8;
  const bool pdl = gpu_gemv_pdl();
  if constexpr (HasTable<D>::value && NC <= 2) {
    const bool w16 = gemv_warps(w, D::kChunk) == 16;
    switch (iq_gemv_variant()) {
      case 1:
        return w16 ? launch_dp4a<D, NC, 16, 2, true>(w, x, n_cols, d_y, s, pdl)
                   : launch_dp4a<D, NC, 8, 4, true>(w, x, n_cols, d_y, s, pdl);
      case 2:
        return w16 ? launch_dp4a<D, NC, 16, 1, true>(w, x, n_cols, d_y, s, pdl)
                   : launch_dp4a<D, NC, 8, 2, true>(w, x, n_cols, d_y, s, pdl);
      case 3:
        if (w16 ? launch_async<D, NC, 16>(w, x, n_cols, d_y, s, pdl) : launch_async<D, NC, 8>(w, x, n_cols, d_y, s, pdl))
          return;
        break;
      default: break;
    }
  }
  if constexpr (HasTable<D>::value) {
    return gemv_warps(w, D::kChunk) == 16 ? launch_dp4a<D, NC, 16, (NC <= 2 ? 4 : 2) / 2, false>(w, x, n_cols, d_y, s, pdl)
                                           : launch_dp4a<D, NC, 8, (NC <= 2 ? 4 : 2), false>(w, x, n_cols, d_y, s, pdl);
  }
  constexpr int kCtas8 = NC <= 2 ? 4 : 2;  // gemv_gpu_kernel's launch bound at 8 warps (half at 16)
  if (gemv_async_mode() != 0) {
    const bool done = gemv_warps(w, D::kChunk) == 16 ? launch_async<D, NC, 16>(w, x, n_cols, d_y, s, pdl)
                                                      : launch_async<D, NC, 8>(w, x, n_cols, d_y, s, pdl);
    if (done) return;
  }
  if (gemv_warps(w, D::kChunk) == 16)
    launch_kernel(gemv_gpu_kernel<D, NC, 16>, grid_for<D, kCtas8 / 2>(groups, 16 * NC * 8 * 4), 16 * 32, s, w.data,
                  w.n_in, w.n_out, x, n_cols, d_y, pdl);
  else launch_kernel(gemv_gpu_kernel<D, NC, 8>, grid_for<D, kCtas8>(groups, 8 * NC * 8 * 4), 8 * 32, s, w.data, w.n_in,
                     w.n_out, x, n_cols, d_y, pdl);
}

// The 16-column MMA kernel at 8 warps runs one CTA per SM with up to 255 registers (kMinBlocks 1)
// rather than two with 128, at which ptxas spills 88-304 bytes per thread (gemv_gpu_mma_kernel).
// The same bits either way (test_cuda "[gemv]" passes with both). Measured (H100, 2026-12-07, one
// `strata bench kernels --types q4_K --kv f16 --ctx 4096 --iters 2` each, in a graph, 16 columns
// over 1): qkv 3.25 -> 2.66, ffn up 4.07 -> 3.08, head 4.45 -> 3.47; ffn down (16 warps, not this
// kernel) 4.32 -> 4.37. STRATA_GEMV_MMA16_ONE_CTA=0 (read once per process) goes back to two CTAs.
inline bool gemv_mma16_one_cta() {
  static const bool on = [] {
    const char* e = std::getenv("STRATA_GEMV_MMA16_ONE_CTA");
    return !e || std::atoi(e) != 0;
  }();
  return on;
}

// The MMA kernel's grid: table readers' (grid_for), persistent where asked, else one CTA per pair.
template <class D, int kCtasPerSm>
unsigned gemv_mma_grid(int64_t pairs, int n_cols, size_t other_smem_bytes) {
  if constexpr (!HasTable<D>::value) {
    const int from = gpu_gemv_mma_persist_from();
    if (from > 0 && n_cols >= from)
      return unsigned(std::min<int64_t>(pairs, int64_t(kCtasPerSm) * std::max(sm_count(), 1)));
  }
  return grid_for<D, kCtasPerSm>(pairs, other_smem_bytes);
}

// The MMA kernel compiled for 1, 2, 8, 16, 32 or 64 columns (the smallest that holds n_cols).
template <class D>
void launch_mma(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s) {
  const int64_t pairs = ((w.n_out + 7) / 8 + 1) / 2;
  const bool w16 = gemv_warps(w, D::kChunk) == 16;
  auto go = [&](auto nc) {
    constexpr int NC = decltype(nc)::value;
    // gemv_gpu_mma_kernel's launch bound: 2 CTAs per SM at 8 warps and up to 16 columns, else 1.
    if constexpr (HasTable<D>::value) {
      if (w16) max_carveout<gemv_gpu_mma_kernel<D, NC, 16>>();
      else max_carveout<gemv_gpu_mma_kernel<D, NC, 8>>();
    }
    if constexpr (NC == 16) {
      if (!w16 && gemv_mma16_one_cta()) {
        if constexpr (HasTable<D>::value) max_carveout<gemv_gpu_mma_kernel<D, NC, 8, 1>>();
        return launch_kernel(gemv_gpu_mma_kernel<D, NC, 8, 1>, gemv_mma_grid<D, 1>(pairs, n_cols, 8 * 32 * 4 * 4),
                             8 * 32, s, w.data, w.n_in, w.n_out, x, n_cols, d_y);
      }
    }
    if (w16)
      launch_kernel(gemv_gpu_mma_kernel<D, NC, 16>, gemv_mma_grid<D, 1>(pairs, n_cols, 16 * 32 * 4 * 4), 16 * 32, s,
                    w.data, w.n_in, w.n_out, x, n_cols, d_y);
    else
      launch_kernel(gemv_gpu_mma_kernel<D, NC, 8>, gemv_mma_grid<D, NC <= 16 ? 2 : 1>(pairs, n_cols, 8 * 32 * 4 * 4),
                    8 * 32, s, w.data, w.n_in, w.n_out, x, n_cols, d_y);
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
  if (n_cols >= gpu_gemv_mma_min_cols() || n_cols > kMaxGemvCols)
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

}  // namespace
}  // namespace strata::kernels::cuda::detail
