// y = W x for quantised W and a batch of f32 activation vectors.
//   w: n_out rows of n_in (any type with CPU kernels); x: (n_tok, n_in) row-major; y: (n_tok, n_out).
// Few tokens (decode, speculative verify): one pass over W with the type's dot kernel per row,
// rows split by bytes over the CPU thread team (thread_team.h). Many tokens (prefill): W is
// dequantised tile by tile into f32 and multiplied with OpenBLAS SGEMM, tiles over the calling
// thread's oneTBB arena, so the arithmetic runs at GEMM speed (fork/join is small next to a tile).
// Thread-safety: callable from any thread, not from inside a team task.
#pragma once

#include <cstdint>

#include "kernels/cpu/max_at.h"
#include "kernels/weight_view.h"

namespace strata::kernels::cpu {

// Token count from which the dequantise + SGEMM path is used.
inline constexpr int64_t kGemmMinTokens = 8;

void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y);

// OpenBLAS must not start its own threads under oneTBB's: each SGEMM runs on one core. Called by
// matmul() before its first SGEMM (and by the SGEMM ceiling, kernels/cpu/gemm_rate.h).
void use_single_threaded_blas();

// The same product by the dot kernels only, whatever n_tok (the reference for the GEMM path).
void matmul_dot(const WeightView& w, const float* x, int64_t n_tok, float* y);
// matmul_dot of one column (x: n_in floats), y the same bits, and max_at(y, 0, n_out) taken by the
// team parts on the rows they wrote (as matmul_q8_max, gemv_q8.h).
MaxAt matmul_dot_max(const WeightView& w, const float* x, float* y);

}  // namespace strata::kernels::cpu
