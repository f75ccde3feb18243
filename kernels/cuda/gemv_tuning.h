// Knobs of the GPU-layout GEMV (gemv_gpu.cu) for tests and benchmarks; the engine leaves them alone.
#pragma once

namespace strata::kernels::cuda {

// Warps per CTA of the GPU-layout GEMV (both kernels): 0 = chosen per matrix shape (the default;
// STRATA_GEMV_WARPS in the environment sets the initial value), or 8 or 16 for every matrix.
// Results depend on it (the warps' partial sums are added in warp order), so the engine keeps the
// per-shape choice: a column's output then never depends on the column count.
void set_gemv_warps(int warps);

// The K types' MMA GEMV (gemv_gpu_mma.cuh) on a persistent grid -- as many CTAs as the GPU holds
// at once, each walking several pairs of row groups -- from n_cols columns on; 0 = never (the
// default; STRATA_GEMV_MMA_PERSIST in the environment sets the initial value). Why: every CTA reads
// all the columns' activations of its chunks (8 columns: ~2 KB of codes per warp and chunk, about
// its 16 rows' weight bytes), so from 8 columns the L2 carries several times the weight stream; a
// CTA that walks several pairs finds them in its SM's L1. The same bits either way.
void set_gemv_mma_persist_from(int n_cols);

// How the fused gate/up GEMV (act_round.h gated_gemv, gemv_gated.cu) shares a CTA between the two
// matrices: 0 = split (twice the warps, half on each matrix, 4 tiles ahead), 1 = pair
// (each warp on both, 2 tile pairs ahead), 2 = pair, 3 pairs ahead (the default: the least slow of
// the three on an H100, gemv_gated.cu). The same bits every way.
// STRATA_GATED_VARIANT in the environment sets the initial value.
void set_gated_gemv_variant(int variant);

}  // namespace strata::kernels::cuda
