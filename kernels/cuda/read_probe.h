// The GPU ceilings strata measures (`strata probe`, benchmarks): device-memory read, pinned host ->
// device copies, dense bf16 and int8 GEMM. Each is timed with CUDA events, best of a few passes after a
// warm-up. Without CUDA the functions exist and return "built without CUDA" (cuda_api_none.cpp).
#pragma once

#include <cstddef>
#include <functional>

#include "core/status.h"
#include "kernels/cuda/cuda_api.h"

namespace strata::kernels::cuda {

// Bytes per second reading `bytes` of device memory (the best of `iters` timed passes after one
// warm-up pass). Allocates and frees the buffer itself.
Result<double> measure_read_bandwidth(size_t bytes, int iters);
// Bytes per second copying `total_bytes` from pinned host memory to the device in copies of
// `chunk_bytes` each (one stream, back to back).
Result<double> measure_h2d_bandwidth(size_t chunk_bytes, size_t total_bytes, int iters);
// Seconds that the work `enqueue` puts on stream s takes on the device: best of `iters` timed
// passes (CUDA events around each) after one warm-up pass. enqueue's error stops the timing.
Result<double> time_on_device(const std::function<Status()>& enqueue, int iters, Stream s);
// FLOP per second of an n x n x n bf16 GEMM with f32 accumulation (cuBLAS).
Result<double> measure_gemm_flops(int n, int iters);
// Operations per second of an n x n x n int8 GEMM with int32 accumulation (cuBLAS; the int8
// tensor-core ceiling a quantised prefill GEMM is measured against). n a multiple of 16.
Result<double> measure_int8_gemm_ops(int n, int iters);

}  // namespace strata::kernels::cuda
