// Internals of the quantised matmul (matmul.cu and its per-type-family files). CUDA only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/ggml_type.h"
#include "core/status.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"

namespace strata::kernels::cuda::detail {

// Calls f(std::integral_constant<int, NC>{}) with the smallest NC in {1, 2, 4, 8, 16} that holds
// n_cols: the column counts the GEMV kernels are compiled for (the first n_cols columns are real,
// the rest skipped by predicates), shared by both GEMV families.
template <class F>
void with_column_tile(int n_cols, F&& f) {
  if (n_cols <= 1) f(std::integral_constant<int, 1>{});
  else if (n_cols <= 2) f(std::integral_constant<int, 2>{});
  else if (n_cols <= 4) f(std::integral_constant<int, 4>{});
  else if (n_cols <= 8) f(std::integral_constant<int, 8>{});
  else f(std::integral_constant<int, 16>{});
}

// Programmatic dependent launch (sm_90; no-ops elsewhere and in kernels launched without it): a
// kernel launched with it may start while the kernel before it on the stream still runs, and must
// pdl_wait() before it reads what that kernel writes; pdl_launch_dependents() lets the next such
// kernel start now (it still waits for this one to complete before reading).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Activations quantised to int8 for gemv_q8.cuh (per 32 elements: scale d, codes q, and the
// integer sums of q over each 16), living in the caller's workspace.
struct ActQ8 {
  const int8_t* q;  // (n_cols, n_in)
  const float* d;   // (n_cols, n_in / 32)
  const int* s16;   // (n_cols, n_in / 16)
};
// perm_chunk = 0: codes in element order (ActQ8); > 0: per chunk of that many elements in the GPU
// layout's lane order (ActGpu). d and s16 are the same either way.
void launch_quantize_act_q8(const float* d_x, int64_t n, int8_t* q, float* d, int* s16, int perm_chunk, cudaStream_t s);
bool launch_gemv_q8_legacy(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s);
bool launch_gemv_q8_k(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s);
bool launch_gemv_q8_iq(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s);  // gemv_q8_iq.cu

// Int8 activations for the GPU layout (gemv_gpu.cuh): the codes of launch_quantize_act_q8 (same d,
// same s16), stored per column and chunk in lane order: element e of a chunk (s = e / 32,
// h = e / 16 % 2, t = e / 4 % 4, i = e % 4) at 64 ((s / 2) ^ t) + 16 t + 8 (s % 2) + 4 h + i for
// 256-element chunks, 8 t + 4 h + i for 32-element ones (q8_0): lane t's words of a sub-block
// pair form one 16-byte word, the 4 lanes t of one load read 64 consecutive bytes, and word k of
// lane t holds its slots 2k, 2k + 1 (the weight layout's rotation, kernels/gpu_layout.h), so the
// dp4a kernel loads at fixed offsets and the MMA kernel, which wants sub-block order, at 64 (k ^ t).
struct ActGpu {
  const int8_t* q;  // (n_cols, n_in), permuted per chunk
  const float* d;   // (n_cols, n_in / 32)
  const int* s16;   // (n_cols, n_in / 16)
};
// GPU-layout (kernels/gpu_layout.h) GEMV and decoders (gemv_gpu.cu); false when the type is not repacked.
bool launch_gemv_gpu(const WeightView& w, const ActGpu& x, int n_cols, float* d_y, cudaStream_t s);
bool launch_dequant_gpu_f32(const WeightView& w, int64_t row0, const int32_t* ids, int64_t n_rows, float scale,
                            float* d_out, cudaStream_t s);
bool launch_dequant_gpu_f16(const WeightView& w, int64_t row0, int64_t n_rows, void* d_out, cudaStream_t s);

// Per-family GEMV launchers (validated inputs; false when the family does not hold the type).
// `piece8` (float types only): rows and x allow 8-element vector loads.
bool launch_gemv_legacy(const WeightView& w, const float* d_x, int n_cols, float* d_y, cudaStream_t s);
bool launch_gemv_k(const WeightView& w, const float* d_x, int n_cols, float* d_y, cudaStream_t s);
bool launch_gemv_iq(const WeightView& w, const float* d_x, int n_cols, float* d_y, cudaStream_t s);  // gemv_iq.cu
bool launch_gemv_float(const WeightView& w, bool piece8, const float* d_x, int n_cols, float* d_y, cudaStream_t s);

// Decodes rows [row0, row0 + n_rows) of W into f32 (exact) or f16 (rounded to nearest), rows
// n_in apart in d_out (dequant.cu). False when the type is not supported.
bool launch_dequant_f32(const WeightView& w, bool piece8, int64_t row0, int64_t n_rows, float* d_out, cudaStream_t s);
bool launch_dequant_f16(const WeightView& w, bool piece8, int64_t row0, int64_t n_rows, void* d_out, cudaStream_t s);
// Output row r = W row d_ids[r] times scale, in f32 (embedding lookups: get_rows).
bool launch_gather_f32(const WeightView& w, bool piece8, const int32_t* d_ids, int64_t n_rows, float scale,
                       float* d_out, cudaStream_t s);

}  // namespace strata::kernels::cuda::detail
