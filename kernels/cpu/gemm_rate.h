// The f32 GEMM ceiling that CPU prefill is held against. CPU prefill dequantises weight tiles and
// multiplies them with single-threaded OpenBLAS SGEMMs, one per oneTBB worker (kernels/cpu/matmul.h),
// so the ceiling is the same shape: every worker of the calling arena runs its own SGEMM on
// matrices that fit its caches, and the rate is the sum.
#pragma once

namespace strata::kernels::cpu {

// FLOP/s (2 per multiply-add) of n x n x n SGEMMs on every worker of the calling oneTBB arena,
// best of `reps` rounds.
double measure_sgemm_flops(int n, int reps);

}  // namespace strata::kernels::cpu
