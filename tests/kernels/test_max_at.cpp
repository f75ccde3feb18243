// The greedy head's argmax taken in thread-team parts (kernels/cpu/max_at.h, matmul_q8_max,
// matmul_dot_max): pieces merged must give the plain loop's answer -- the first index of the largest
// value, NaNs passed over, none where nothing is above -inf -- whatever the cut, and the fused
// products must write the same logits as the plain ones, on teams of several sizes (other parts).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <limits>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/max_at.h"
#include "kernel_test_buffers.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::kernels;
using namespace strata::kernels::cpu;

constexpr float kInf = std::numeric_limits<float>::infinity();

// The rule, one element at a time.
int64_t first_max(const float* x, int64_t n) {
  int64_t at = -1;
  float best = -kInf;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > best) best = x[i], at = i;
  return at;
}

template <typename Fn>
void on_team(int threads, Fn fn) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
  tbb::task_arena(threads).execute(fn);
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("max_at over pieces, merged in any order, is the first largest element", "[max_at]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int row = 0; row < 300; ++row) {
    const int64_t n = row < 50 ? row : 1 + rng.next_u32() % 5000;
    std::vector<float> x(static_cast<size_t>(n));
    const uint32_t levels = 1 + rng.next_u32() % 5;  // few distinct values: ties everywhere
    for (float& v : x) {
      const uint32_t r = rng.next_u32() % 8;
      v = r == 0 ? -kInf : r == 1 ? nan : r == 2 ? -0.0f : float(rng.next_u32() % levels) - 2.0f;
    }
    if (row % 9 == 0)
      for (float& v : x) v = rng.next_u32() % 2 ? nan : -kInf;  // nothing above -inf
    if (row % 5 == 0 && n > 0) x[size_t(n - 1)] = 50.0f;        // the maximum in the tail
    const int64_t want = first_max(x.data(), n);
    INFO("row " << row << " n " << n);
    CHECK(max_at(x.data(), 0, n).index == want);
    // Random cuts, merged from the last piece back (the merge must not favour an order).
    std::vector<int64_t> cuts = {0, n};
    for (int c = int(rng.next_u32() % 6); c > 0; --c) cuts.push_back(n ? int64_t(rng.next_u32() % uint32_t(n + 1)) : 0);
    std::sort(cuts.begin(), cuts.end());
    MaxAt m;
    for (size_t p = cuts.size() - 1; p > 0; --p) m = max_at_merge(max_at(x.data(), cuts[p - 1], cuts[p]), m);
    CHECK(m.index == want);
    if (want >= 0) CHECK(m.value == x[size_t(want)]);
  }
}

TEST_CASE("matmul_q8_max and matmul_dot_max write matmul_q8's and matmul_dot's logits and find their argmax", "[max_at]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const int64_t n_in = 512, n_out = 3000;
  for (const GgmlType type : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F32}) {
    const uint64_t rb = ggml_row_bytes(type, uint64_t(n_in));
    std::vector<uint8_t> wb;
    if (type == GgmlType::F32) {
      const std::vector<float> f = test::random_normal(size_t(n_in * n_out), rng, 0.05f);
      wb.resize(f.size() * 4);
      std::memcpy(wb.data(), f.data(), wb.size());
    } else {
      wb = test::random_quant_rows(type, n_in, n_out, rng);
    }
    if (type == GgmlType::F32) {  // row 0's logit NaN, row 1's -inf (x > 0)
      auto* f = reinterpret_cast<float*>(wb.data());
      f[0] = std::numeric_limits<float>::quiet_NaN();
      f[n_in] = -kInf;
    }
    const WeightView w{wb.data(), type, n_in, n_out, rb};
    std::vector<float> x = test::random_normal(size_t(n_in), rng);
    for (float& v : x) v = std::fabs(v) + 0.01f;
    // The row of the largest logit, copied far apart (into other parts on any team): tied maxima,
    // the first of them the answer.
    std::vector<float> y0(static_cast<size_t>(n_out));
    if (type == GgmlType::F32) matmul_dot(w, x.data(), 1, y0.data());
    else matmul_q8(w, x.data(), 1, y0.data());
    const int64_t big = first_max(y0.data(), n_out);
    REQUIRE(big >= 2);
    const int64_t copies[3] = {n_out / 3 + 7, n_out / 2 + 1, n_out - 2};
    for (const int64_t c : copies) std::memcpy(wb.data() + c * rb, wb.data() + big * rb, rb);
    for (const int threads : {1, 2, 3, 7}) {
      INFO(ggml_type_info(type).name << ", " << threads << " threads");
      on_team(threads, [&] {
        std::vector<float> want(static_cast<size_t>(n_out)), got(static_cast<size_t>(n_out), -1.0f);
        MaxAt m;
        if (type == GgmlType::F32) {
          matmul_dot(w, x.data(), 1, want.data());
          m = matmul_dot_max(w, x.data(), got.data());
        } else {
          matmul_q8(w, x.data(), 1, want.data());
          m = matmul_q8_max(w, x.data(), got.data());
        }
        CHECK(same_floats(got, want));
        CHECK(m.index == first_max(want.data(), n_out));
        CHECK(m.index == std::min(big, copies[0]));
        if (type == GgmlType::F32) CHECK(std::isnan(want[0]));
      });
    }
  }
}
