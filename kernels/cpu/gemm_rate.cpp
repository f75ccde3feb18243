#include "kernels/cpu/gemm_rate.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <cblas.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "kernels/cpu/matmul.h"

namespace strata::kernels::cpu {

double measure_sgemm_flops(int n, int reps) {
  use_single_threaded_blas();
  const int workers = std::max(1, tbb::this_task_arena::max_concurrency());
  const size_t nn = size_t(n) * size_t(n);
  // Per worker: A, B, C. Values small and non-zero (denormals or zeros could take other paths).
  std::vector<std::vector<float>> mats(size_t(workers) * 3, std::vector<float>(nn, 0.5f));
  auto round = [&] {
    tbb::parallel_for(0, workers, [&](int w) {
      auto& a = mats[size_t(w) * 3];
      auto& b = mats[size_t(w) * 3 + 1];
      auto& c = mats[size_t(w) * 3 + 2];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f / float(n), a.data(), n, b.data(), n,
                  0.0f, c.data(), n);
    });
  };
  round();  // warm-up: pages, OpenBLAS buffers
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    round();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, 2.0 * double(n) * double(n) * double(n) * workers / s);
  }
  return best;
}

}  // namespace strata::kernels::cpu
