// The host-memory read ceiling that decode on the CPU is held against: a streaming read of a
// buffer far larger than the caches, on the calling arena's threads, best of a few runs.
#pragma once

#include <cstdint>

namespace strata::kernels::cpu {

// GB/s (1e9 bytes per second) for reading `bytes` bytes, best of `reps` passes.
double measure_read_bandwidth(uint64_t bytes, int reps);

}  // namespace strata::kernels::cpu
