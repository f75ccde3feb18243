#include "kernels/cpu/gemv_q8.h"

#include <algorithm>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/team_parts.h"

namespace strata::kernels::cpu {

// Rows [r0, r1) of y = W x, kQ8MaxRows rows per kernel call from r0, kQ8MaxCols columns at a time.
void matmul_q8_rows(const WeightView& w, const Q8ActView& x, float* y, DotQ8RowsFn kernel, int64_t r0, int64_t r1) {
  for (int64_t row = r0; row < r1; row += kQ8MaxRows) {
    const int n_rows = int(std::min<int64_t>(kQ8MaxRows, r1 - row));
    for (int c0 = 0; c0 < x.n_col; c0 += kQ8MaxCols) {
      const int count = std::min(kQ8MaxCols, x.n_col - c0);
      kernel(w.row(row), int64_t(w.row_bytes), n_rows, x.columns(c0, count), y + c0 * w.n_out + row, w.n_out);
    }
  }
}

namespace {

DotQ8RowsFn kernel_for(const WeightView& w, const Q8ActView& x, DotQ8RowsFn kernel) {
  if (!kernel) kernel = best_dot_q8_rows(w.type);
  STRATA_CHECK(kernel, "no int8-activation kernel for type {}", ggml_type_info(w.type).name);
  STRATA_CHECK(x.n == w.n_in, "matmul_q8: activations of {} for rows of {}", x.n, w.n_in);
  return kernel;
}

// The caller's scratch for the quantised activations (64-byte aligned, reused by the thread). The
// team's threads read it while the caller waits in team_run, which no part may call (thread_team.h):
// nothing can resize it under them.
void* act_scratch(int64_t n_in, int64_t n_tok) {
  thread_local std::vector<uint8_t> scratch;
  const size_t bytes = q8_act_bytes(n_in, n_tok) + 64;
  if (scratch.size() < bytes) scratch.resize(bytes);
  auto base = reinterpret_cast<uintptr_t>(scratch.data());
  return reinterpret_cast<void*>((base + 63) / 64 * 64);
}

// y[j] = W[j] x for `count` matrices on one input: their rows, concatenated, cut into the thread
// team's parts by bytes (RowParts) at whole kQ8MaxRows groups, one team job for all of them.
void rows_on_team(const WeightView* const* w, float* const* y, const DotQ8RowsFn* kernels, int count,
                  const Q8ActView& x) {
  uint64_t offset[kMaxQ8Group + 1] = {0};
  for (int j = 0; j < count; ++j) offset[j + 1] = offset[j] + uint64_t(w[j]->n_out) * w[j]->row_bytes;
  const RowParts parts(offset[count], kQ8MaxRows, x.n_col);
  static constexpr const char* kLabels[] = {"gemv_q8", "gemv_q8", "gemv_q8 x2", "gemv_q8 x3", "gemv_q8 x4"};
  const team_profile::Label label(kLabels[std::min(count, 4)]);
  team_run(parts.n_parts, [&](int p) {
    for (int j = 0; j < count; ++j) {
      const auto [r0, r1] = parts.rows(p, offset[j], *w[j]);
      if (r0 < r1) matmul_q8_rows(*w[j], x, y[j], kernels[j], r0, r1);
    }
  });
}

}  // namespace

Q8ActView quantize_q8_input(const float* x, int64_t n_in, int64_t n_tok) {
  return quantize_q8_act(x, n_in, n_tok, act_scratch(n_in, n_tok));
}

DotQ8RowsFn q8_kernel_for(const WeightView& w, const Q8ActView& x) { return kernel_for(w, x, nullptr); }

void matmul_q8(const WeightView& w, const Q8ActView& x, float* y, DotQ8RowsFn kernel) {
  kernel = kernel_for(w, x, kernel);
  const WeightView* ws[1] = {&w};
  rows_on_team(ws, &y, &kernel, 1, x);
}

void matmul_q8_group(const WeightView* const* w, float* const* y, int count, const float* x, int64_t n_tok) {
  STRATA_CHECK(count >= 1 && count <= kMaxQ8Group, "matmul_q8_group: {} matrices (1 to {})", count, kMaxQ8Group);
  for (int j = 1; j < count; ++j)
    STRATA_CHECK(w[j]->n_in == w[0]->n_in, "matmul_q8_group: rows of {} and of {}", w[0]->n_in, w[j]->n_in);
  const Q8ActView q = quantize_q8_input(x, w[0]->n_in, n_tok);
  DotQ8RowsFn kernels[kMaxQ8Group];
  for (int j = 0; j < count; ++j) kernels[j] = kernel_for(*w[j], q, nullptr);
  rows_on_team(w, y, kernels, count, q);
}

MaxAt matmul_q8_max(const WeightView& w, const float* x, float* y) {
  const Q8ActView q = quantize_q8_input(x, w.n_in, 1);
  const DotQ8RowsFn kernel = kernel_for(w, q, nullptr);
  // rows_on_team's parts for one matrix, so every row is computed as matmul_q8 computes it.
  const RowParts parts(uint64_t(w.n_out) * w.row_bytes, kQ8MaxRows, 1);
  std::vector<MaxAt> best(size_t(parts.n_parts));
  const team_profile::Label label("gemv_q8 max");
  team_run(parts.n_parts, [&](int p) {
    const auto [r0, r1] = parts.rows(p, 0, w);
    if (r0 >= r1) return;
    matmul_q8_rows(w, q, y, kernel, r0, r1);
    best[size_t(p)] = max_at(y, r0, r1);
  });
  return max_at_merge(best);
}

void matmul_q8(const WeightView& w, const float* x, int64_t n_tok, float* y, DotQ8RowsFn kernel) {
  const Q8ActView q = quantize_q8_input(x, w.n_in, n_tok);
  matmul_q8(w, q, y, kernel);
}

}  // namespace strata::kernels::cpu
