// How a decode-sized CPU op is cut into thread-team parts (thread_team.h): by bytes read, so each
// thread streams about the same share, and never into parts too small to pay for a thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/cpu/thread_team.h"
#include "kernels/weight_view.h"

namespace strata::kernels::cpu {

// Below about this many bytes a thread's share takes less time than handing it over (the job's
// cache-line round trips and the barrier: about a microsecond), so small ops use fewer threads.
inline constexpr uint64_t kMinPartBytes = 16384;

// Parts for an op reading `bytes` in at most `max_parts` independent pieces.
inline int part_count(uint64_t bytes, int64_t max_parts = INT64_MAX) {
  const int64_t by_size = int64_t(std::max<uint64_t>(1, bytes / kMinPartBytes));
  return int(std::max<int64_t>(1, std::min<int64_t>({by_size, max_parts, team_threads()})));
}

// The rows of one or several matrices, concatenated (matrix j from byte offset_j), cut into
// n_parts parts of about total / n_parts bytes: a row belongs to the part its first byte falls in,
// with part bounds rounded up to whole `align`-row groups of each matrix (so a GEMV kernel's row
// groups start where they did in one thread's loop).
struct RowParts {
  uint64_t total = 0;  // bytes of all the rows
  int64_t align = 1;
  int n_parts = 1;

  // cols: activation columns per row (work per byte grows with them: more of them, more parts).
  RowParts(uint64_t total_bytes, int64_t align_rows, int64_t cols = 1)
      : total(total_bytes), align(align_rows), n_parts(part_count(total_bytes * uint64_t(std::max<int64_t>(1, cols)))) {}

  // Rows [begin, end) of the matrix w starting at byte `offset` that part p computes (maybe none).
  std::pair<int64_t, int64_t> rows(int p, uint64_t offset, const WeightView& w) const {
    auto edge = [&](int q) -> int64_t {
      const uint64_t at = total * uint64_t(q) / uint64_t(n_parts);  // < 2^64: total < 2^50, q <= threads
      if (at <= offset) return 0;
      const int64_t r = int64_t((at - offset + w.row_bytes - 1) / w.row_bytes);  // first row starting at or after `at`
      return std::min<int64_t>((r + align - 1) / align * align, w.n_out);
    };
    return {edge(p), edge(p + 1)};
  }
};

}  // namespace strata::kernels::cpu
