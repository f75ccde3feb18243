#include "kernels/cpu/gemv_q8.h"

#include <algorithm>
#include <vector>

#include <tbb/parallel_for.h>

#include "core/status.h"

namespace strata::kernels::cpu {

namespace {

// About 16 KB of weights per task: enough rows to amortise the task, small enough to balance;
// whole kQ8MaxRows groups where the matrix has enough rows.
int64_t row_grain(const WeightView& w) {
  int64_t grain = std::max<int64_t>(1, int64_t(16384 / std::max<uint64_t>(1, w.row_bytes)));
  if (w.n_out >= 64 * kQ8MaxRows) grain = (grain + kQ8MaxRows - 1) / kQ8MaxRows * kQ8MaxRows;
  return grain;
}

// Rows [r0, r1) of y = W x, kQ8MaxRows rows per kernel call from r0, kQ8MaxCols columns at a time.
void rows_q8(const WeightView& w, const Q8ActView& x, float* y, DotQ8RowsFn kernel, int64_t r0, int64_t r1) {
  for (int64_t row = r0; row < r1; row += kQ8MaxRows) {
    const int n_rows = int(std::min<int64_t>(kQ8MaxRows, r1 - row));
    for (int c0 = 0; c0 < x.n_col; c0 += kQ8MaxCols) {
      const int count = std::min(kQ8MaxCols, x.n_col - c0);
      kernel(w.row(row), int64_t(w.row_bytes), n_rows, x.columns(c0, count), y + c0 * w.n_out + row, w.n_out);
    }
  }
}

DotQ8RowsFn kernel_for(const WeightView& w, const Q8ActView& x, DotQ8RowsFn kernel) {
  if (!kernel) kernel = best_dot_q8_rows(w.type);
  STRATA_CHECK(kernel, "no int8-activation kernel for type {}", ggml_type_info(w.type).name);
  STRATA_CHECK(x.n == w.n_in, "matmul_q8: activations of {} for rows of {}", x.n, w.n_in);
  return kernel;
}

// The caller's scratch for the quantised activations (64-byte aligned, reused by the thread).
void* act_scratch(int64_t n_in, int64_t n_tok) {
  thread_local std::vector<uint8_t> scratch;
  const size_t bytes = q8_act_bytes(n_in, n_tok) + 64;
  if (scratch.size() < bytes) scratch.resize(bytes);
  auto base = reinterpret_cast<uintptr_t>(scratch.data());
  return reinterpret_cast<void*>((base + 63) / 64 * 64);
}

}  // namespace

void matmul_q8(const WeightView& w, const Q8ActView& x, float* y, DotQ8RowsFn kernel) {
  kernel = kernel_for(w, x, kernel);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, w.n_out, row_grain(w)),
                    [&](const tbb::blocked_range<int64_t>& r) { rows_q8(w, x, y, kernel, r.begin(), r.end()); });
}

void matmul_q8_group(const WeightView* const* w, float* const* y, int count, const float* x, int64_t n_tok) {
  STRATA_CHECK(count >= 1, "matmul_q8_group: no matrices");
  for (int j = 1; j < count; ++j)
    STRATA_CHECK(w[j]->n_in == w[0]->n_in, "matmul_q8_group: rows of {} and of {}", w[0]->n_in, w[j]->n_in);
  const Q8ActView q = quantize_q8_act(x, w[0]->n_in, n_tok, act_scratch(w[0]->n_in, n_tok));
  // The tasks: each matrix's rows cut at its grain (whole kQ8MaxRows groups from row 0), one loop
  // over all of them. Lists of this call (not thread_local: a thread waiting in the loop may run a
  // stolen task that calls this again).
  struct Task {
    int j;
    int64_t r0, r1;
  };
  std::vector<Task> tasks;
  std::vector<DotQ8RowsFn> kernels(size_t(count), nullptr);
  for (int j = 0; j < count; ++j) {
    kernels[size_t(j)] = kernel_for(*w[j], q, nullptr);
    const int64_t grain = row_grain(*w[j]);
    const int64_t step = (grain + kQ8MaxRows - 1) / kQ8MaxRows * kQ8MaxRows;
    for (int64_t r = 0; r < w[j]->n_out; r += step) tasks.push_back({j, r, std::min(w[j]->n_out, r + step)});
  }
  tbb::parallel_for(tbb::blocked_range<size_t>(0, tasks.size()), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) {
      const Task& t = tasks[i];
      rows_q8(*w[t.j], q, y[t.j], kernels[size_t(t.j)], t.r0, t.r1);
    }
  });
}

void matmul_q8(const WeightView& w, const float* x, int64_t n_tok, float* y, DotQ8RowsFn kernel) {
  const Q8ActView q = quantize_q8_act(x, w.n_in, n_tok, act_scratch(w.n_in, n_tok));
  matmul_q8(w, q, y, kernel);
}

}  // namespace strata::kernels::cpu
