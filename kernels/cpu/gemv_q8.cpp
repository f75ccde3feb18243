#include "kernels/cpu/gemv_q8.h"

#include <algorithm>
#include <vector>

#include <tbb/parallel_for.h>

#include "core/status.h"

namespace strata::kernels::cpu {

void matmul_q8(const WeightView& w, const Q8ActView& x, float* y, DotQ8RowsFn kernel) {
  if (!kernel) kernel = best_dot_q8_rows(w.type);
  STRATA_CHECK(kernel, "no int8-activation kernel for type {}", ggml_type_info(w.type).name);
  STRATA_CHECK(x.n == w.n_in, "matmul_q8: activations of {} for rows of {}", x.n, w.n_in);
  // About 16 KB of weights per task: enough rows to amortise the task, small enough to balance;
  // whole kQ8MaxRows groups where the matrix has enough rows.
  int64_t grain = std::max<int64_t>(1, int64_t(16384 / std::max<uint64_t>(1, w.row_bytes)));
  if (w.n_out >= 64 * kQ8MaxRows) grain = (grain + kQ8MaxRows - 1) / kQ8MaxRows * kQ8MaxRows;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, w.n_out, grain), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t row = r.begin(); row < r.end(); row += kQ8MaxRows) {
      const int n_rows = int(std::min<int64_t>(kQ8MaxRows, r.end() - row));
      for (int c0 = 0; c0 < x.n_col; c0 += kQ8MaxCols) {
        const int count = std::min(kQ8MaxCols, x.n_col - c0);
        kernel(w.row(row), int64_t(w.row_bytes), n_rows, x.columns(c0, count), y + c0 * w.n_out + row, w.n_out);
      }
    }
  });
}

void matmul_q8(const WeightView& w, const float* x, int64_t n_tok, float* y, DotQ8RowsFn kernel) {
  thread_local std::vector<uint8_t> scratch;
  const size_t bytes = q8_act_bytes(w.n_in, n_tok) + 64;
  if (scratch.size() < bytes) scratch.resize(bytes);
  auto base = reinterpret_cast<uintptr_t>(scratch.data());
  void* buf = reinterpret_cast<void*>((base + 63) / 64 * 64);
  const Q8ActView q = quantize_q8_act(x, w.n_in, n_tok, buf);
  matmul_q8(w, q, y, kernel);
}

}  // namespace strata::kernels::cpu
