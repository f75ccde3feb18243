// Device-memory read ceiling: a streaming read kernel (16-byte loads, a grid of resident blocks)
// over a large device buffer, timed with CUDA events. The denominator for memory-bound kernel
// figures (gemv, attention). CUDA builds only (STRATA_HAVE_CUDA): the no-CUDA build has no
// definition, so only code under that macro may call it.
#pragma once

#include <cstddef>

#include "core/status.h"

namespace strata::kernels::cuda {

// Bytes per second reading `bytes` of device memory (the best of `iters` timed passes after one
// warm-up pass). Allocates and frees the buffer itself.
Result<double> measure_read_bandwidth(size_t bytes, int iters);

}  // namespace strata::kernels::cuda
