// Knobs of the GPU-layout GEMV (gemv_gpu.cu) for tests and benchmarks; the engine leaves them alone.
#pragma once

namespace strata::kernels::cuda {

// Warps per CTA of the GPU-layout GEMV (both kernels): 0 = chosen per matrix shape (the default;
// STRATA_GEMV_WARPS in the environment sets the initial value), or 8 or 16 for every matrix.
// Results depend on it (the warps' partial sums are added in warp order), so the engine keeps the
// per-shape choice: a column's output then never depends on the column count.
void set_gemv_warps(int warps);

// How the fused gate/up GEMV (act_round.h gated_gemv, gemv_gated.cu) shares a CTA between the two
// matrices: 0 = split (twice the warps, half on each matrix, 4 tiles ahead), 1 = pair
// (each warp on both, 2 tile pairs ahead), 2 = pair, 3 pairs ahead (the default: the least slow of
// the three on an H100, gemv_gated.cu). The same bits every way.
// STRATA_GATED_VARIANT in the environment sets the initial value.
void set_gated_gemv_variant(int variant);

}  // namespace strata::kernels::cuda
