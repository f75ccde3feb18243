#include "kernels/cpu/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

namespace strata::kernels::cpu {

double measure_read_bandwidth(uint64_t bytes, int reps) {
  const size_t n = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  for (size_t i = 0; i < n; ++i) buf[i] = i;  // touch every page
  double best = 0;
  volatile uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t x = tbb::parallel_reduce(
        tbb::blocked_range<size_t>(0, n, 1 << 16), uint64_t(0),
        [&](const tbb::blocked_range<size_t>& rg, uint64_t acc) {
          // Four independent chains so the loop is bound by loads, not by the xor latency.
          uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
          size_t i = rg.begin();
          for (; i + 4 <= rg.end(); i += 4) {
            a0 ^= buf[i]; a1 ^= buf[i + 1]; a2 ^= buf[i + 2]; a3 ^= buf[i + 3];
          }
          for (; i < rg.end(); ++i) a0 ^= buf[i];
          return acc ^ a0 ^ a1 ^ a2 ^ a3;
        },
        [](uint64_t a, uint64_t b) { return a ^ b; });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink ^ x;
    best = std::max(best, double(n * sizeof(uint64_t)) / s / 1e9);
  }
  return best;
}

}  // namespace strata::kernels::cpu
