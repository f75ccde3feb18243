// Knobs of the GPU-layout GEMV (gemv_gpu.cu) for tests and benchmarks; the engine leaves them alone.
#pragma once

namespace strata::kernels::cuda {

// Warps per CTA of the GPU-layout GEMV (both kernels): 0 = chosen per matrix shape (the default;
// STRATA_GEMV_WARPS in the environment sets the initial value), or 8 or 16 for every matrix.
// Results depend on it (the warps' partial sums are added in warp order), so the engine keeps the
// per-shape choice: a column's output then never depends on the column count.
void set_gemv_warps(int warps);

}  // namespace strata::kernels::cuda
