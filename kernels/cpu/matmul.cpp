#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include <cblas.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/status.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cpu/team_parts.h"

namespace strata::kernels::cpu {
namespace {

constexpr int64_t kTileRows = 64;

// Decode-sized: the thread team, rows cut by bytes (one job, no tasks to steal). best: null, or one
// entry per part for the maximum of its rows (n_tok == 1).
void dot_rows_on_team(const WeightView& w, const float* x, int64_t n_tok, float* y, std::vector<MaxAt>* best) {
  const DotFn dot = best_dot(w.type);
  STRATA_CHECK(dot, "no dot kernel for type {}", ggml_type_info(w.type).name);
  const RowParts parts(uint64_t(w.n_out) * w.row_bytes, 1, n_tok);
  if (best) best->assign(size_t(parts.n_parts), MaxAt{});
  const team_profile::Label label("dot_rows");
  team_run(parts.n_parts, [&](int p) {
    const auto [r0, r1] = parts.rows(p, 0, w);
    for (int64_t row = r0; row < r1; ++row) {
      const uint8_t* wr = w.row(row);
      for (int64_t t = 0; t < n_tok; ++t) y[t * w.n_out + row] = dot(wr, x + t * w.n_in, w.n_in);
    }
    if (best && r0 < r1) (*best)[size_t(p)] = max_at(y, r0, r1);
  });
}

}  // namespace

void use_single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void matmul_dot(const WeightView& w, const float* x, int64_t n_tok, float* y) {
  dot_rows_on_team(w, x, n_tok, y, nullptr);
}

MaxAt matmul_dot_max(const WeightView& w, const float* x, float* y) {
  std::vector<MaxAt> best;
  dot_rows_on_team(w, x, 1, y, &best);
  return max_at_merge(best);
}

void matmul(const WeightView& w, const float* x, int64_t n_tok, float* y) {
  if (n_tok < kGemmMinTokens) return matmul_dot(w, x, n_tok, y);
  use_single_threaded_blas();
  const auto* k = quant_kernels(w.type);
  STRATA_CHECK(k, "no kernels for type {}", ggml_type_info(w.type).name);
  static tbb::enumerable_thread_specific<std::vector<float>> tiles;
  const int64_t n_tiles = (w.n_out + kTileRows - 1) / kTileRows;
  tbb::parallel_for(int64_t(0), n_tiles, [&](int64_t tile) {
    const int64_t r0 = tile * kTileRows, rows = std::min(kTileRows, w.n_out - r0);
    auto& buf = tiles.local();
    buf.resize(size_t(rows * w.n_in));
    for (int64_t r = 0; r < rows; ++r) k->dequantize(w.row(r0 + r), buf.data() + r * w.n_in, w.n_in);
    // y[:, r0:r0+rows] = x (n_tok x n_in) * tile^T (n_in x rows)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n_tok), int(rows), int(w.n_in), 1.0f, x,
                int(w.n_in), buf.data(), int(w.n_in), 0.0f, y + r0, int(w.n_out));
  });
}

}  // namespace strata::kernels::cpu
