// The int8-activation kernels (kernels/cpu/dot_q8.h, gemv_q8.h) against their scalar reference and
// against dequantise-then-dot on the same int8-rounded activations.
//
// - SIMD vs scalar: the integer sums and the f32 lane order are specified (dot_q8.h), so every ISA
//   must return the scalar kernel's floats bit for bit.
// - Scalar vs dequantise-then-dot (double, on x_hat = q * d): the kernel's integer sums are exact;
//   what remains is f32 rounding: of each group's float(isum) * dx, of the fma into one of eight
//   lanes (B terms per lane: B = super-blocks, or the blocks of 32 / 8) and of the final sum,
//   plus the reference's own rounding of the decoded weights (d * scale first, ggml's order).
//   We allow tol = 8 * (B + 8) * FLT_EPSILON * sum_i |w_i * x_hat_i|. A decode bug moves the result
//   by ~|w_i x_hat_i| for some i, ~sum/n on average: far above tol for the n used here (<= 2048).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "core/cpu_features.h"
#include "core/ggml_type.h"
#include "core/rng.h"
#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernel_test_buffers.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::kernels;
using namespace strata::kernels::cpu;

const GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                           GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::Q2_K, GgmlType::Q3_K,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS,
                           GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ2_XXS, GgmlType::IQ2_XS,
                           GgmlType::IQ2_S, GgmlType::IQ1_S, GgmlType::IQ1_M};

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

struct Q8Buffer {
  std::vector<uint8_t> storage;
  Q8ActView view;
  Q8Buffer(const std::vector<float>& x, int64_t n, int64_t n_col) : storage(q8_act_bytes(n, n_col) + 64) {
    auto base = reinterpret_cast<uintptr_t>(storage.data());
    view = quantize_q8_act(x.data(), n, n_col, reinterpret_cast<void*>((base + 63) / 64 * 64));
  }
};

std::vector<float> make_x(int64_t count, Rng& rng, bool wide) {
  std::vector<float> x = test::random_normal(size_t(count), rng);
  if (wide)
    for (auto& v : x) v *= std::exp2(rng.uniform(-12.0f, 12.0f));
  return x;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The grid loads to test for a type (dot_q8.h GridLoad): both where the type's kernels differ by
// it (IQ3_*), else one. Every test below that loops over ISAs loops over these too, so both of the
// IQ3 decoders are held to the scalar reference whichever one this process picked.
std::vector<GridLoad> grid_loads(GgmlType t, Q8Isa isa) {
  if (dot_q8_kernel(t, isa, GridLoad::gather) == dot_q8_kernel(t, isa, GridLoad::direct)) return {GridLoad::gather};
  return {GridLoad::gather, GridLoad::direct};
}

int64_t block_elems(GgmlType t) { return int64_t(ggml_type_info(t).block_size); }

// Byte offsets of the f16 scale fields (d, and m / dmin) in one block (kernels/cpu/quant/blocks.h;
// IQ1_M spreads its d over the scale words: set_f16).
std::vector<int> f16_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {0};
  }
}

void set_f16(GgmlType t, uint8_t* block, int off, uint16_t h) {
  if (t != GgmlType::IQ1_M) {
    std::memcpy(block + off, &h, 2);
    return;
  }
  // The top nibble of scale word k holds bits 4k..4k+3 of d (BlockIQ1_M: scales at byte 48).
  for (int k = 0; k < 4; ++k) {
    uint16_t w;
    std::memcpy(&w, block + 48 + 2 * k, 2);
    w = uint16_t((w & 0x0fff) | (((h >> (4 * k)) & 15u) << 12));
    std::memcpy(block + 48 + 2 * k, &w, 2);
  }
}

// Rows of random bytes: every code, scale and min pattern the format allows (Q8_0 -128, Q3_K's
// and Q6_K's most negative sub-scales, the largest 6-bit K scales and mins, all IQ4 levels, every
// grid entry, sign and delta), with
// the f16 fields set to finite extremes: the largest f16, the smallest subnormal, zero, and
// ordinary values, of either sign.
std::vector<uint8_t> make_raw_rows(GgmlType t, int64_t n, int64_t rows, Rng& rng) {
  const uint64_t rb = ggml_row_bytes(t, uint64_t(n));
  std::vector<uint8_t> w(rb * uint64_t(rows));
  for (auto& b : w) b = uint8_t(rng.next_u32() >> 24);
  const uint16_t kF16[] = {0x7bff, 0x0001, 0x0000, 0x3c00, 0x2e66, 0x1400};
  const size_t bytes = ggml_type_info(t).type_size;
  for (size_t blk = 0; blk < w.size() / bytes; ++blk)
    for (int off : f16_fields(t)) {
      const uint16_t h = uint16_t(kF16[rng.next_u32() % 6] | ((rng.next_u32() & 1u) << 15));
      set_f16(t, w.data() + blk * bytes, off, h);
    }
  return w;
}

}  // namespace

TEST_CASE("int8 activations: codes, scales and sums", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const int64_t n = 512, n_col = 3;
  auto x = make_x(n * n_col, rng, true);
  for (int i = 0; i < 32; ++i) x[size_t(64 + i)] = 0.0f;  // an all-zero group
  Q8Buffer q(x, n, n_col);
  for (int c = 0; c < n_col; ++c) {
    for (int64_t g = 0; g < n / 32; ++g) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(c * n + g * 32 + i)]));
      REQUIRE(q.view.col_d(c)[g] == amax / 127.0f);
      int group_sum = 0;
      for (int h = 0; h < 2; ++h) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += q8_act_code(q.view, c, g * 32 + h * 16 + i);
        REQUIRE(q.view.col_s(c)[2 * g + h] == sum);
        group_sum += sum;
      }
      REQUIRE(q.view.col_sf(c)[g] == float(group_sum) * q.view.col_d(c)[g]);
    }
    for (int64_t i = 0; i < n; ++i) {
      const int8_t v = q8_act_code(q.view, c, i);
      REQUIRE(v >= -127);
      const float d = q.view.col_d(c)[i / 32];
      // The code is the one std::nearbyint gives (half to even), whatever the kernel rounds with.
      const float id = d > 0 ? 1.0f / d : 0.0f;
      REQUIRE(v == int8_t(std::clamp(std::nearbyint(x[size_t(c * n + i)] * id), -127.0f, 127.0f)));
      REQUIRE(std::fabs(q8_act_value(q.view, c, i) - x[size_t(c * n + i)]) <= 0.5f * d * (1 + 1e-5f));
    }
  }
  REQUIRE(q.view.col_d(0)[2] == 0.0f);
  REQUIRE(q8_act_code(q.view, 0, 70) == 0);
}

// q8_act.h's lane order: a permutation of each column; every 4-byte lane of a 32-byte vector holds
// four consecutive elements of one half-group, the same group in that lane of all four vectors of
// its quad; the elements past the last whole 256 stay in place.
TEST_CASE("int8 activations: lane order", "[q8]") {
  const int64_t n = 512 + 3 * 32;
  std::vector<int> seen(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = q8_act_pos(n, i);
    REQUIRE(pos >= 0);
    REQUIRE(pos < n);
    ++seen[size_t(pos)];
    if (i >= 512) {
      REQUIRE(pos == i);
      continue;
    }
    const int64_t chunk = i / 256, e = i % 256, group = e / 32, half = (e % 32) / 16;
    const int64_t v = (pos % 256) / 32, lane = (pos % 32) / 4;
    REQUIRE(pos / 256 == chunk);
    REQUIRE(v % 2 == group / 4);             // quad p (vectors 2k + p) holds groups 4p..4p+3
    REQUIRE(lane % 4 == group % 4);          // in lanes g mod 4 ...
    REQUIRE(lane / 4 == half);               // ... and 4 + g mod 4 for the second half
    REQUIRE(pos % 4 == e % 4);               // four consecutive elements per lane
    REQUIRE((e % 16) / 4 == v / 2);          // vector k of the quad: elements 4k..4k+3 of the half
  }
  REQUIRE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  REQUIRE(q8_act_pos(n, 32 * 5 + 16 + 4 * 2 + 1) == 32 * 5 + 4 * 5 + 1);  // group 5, half 1, k 2: v 5, lane 5
}

// A last half chunk (n mod 256 = 128) is one quad, its vectors k 32 bytes apart: the same lanes as
// quad 0 of a whole chunk.
TEST_CASE("int8 activations: lane order of a last half chunk", "[q8]") {
  const int64_t n = 1152, whole = 1024;
  std::vector<int> seen(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) ++seen[size_t(q8_act_pos(n, i))];
  REQUIRE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  for (int64_t i = whole; i < n; ++i) {
    const int64_t e = i - whole, pos = q8_act_pos(n, i) - whole;
    const int64_t group = e / 32, half = (e % 32) / 16, v = pos / 32, lane = (pos % 32) / 4;
    REQUIRE(pos < 128);
    REQUIRE(lane == group + 4 * half);
    REQUIRE(v == (e % 16) / 4);
    REQUIRE(pos % 4 == e % 4);
  }
  // Where a half chunk's element goes is where the same element of a chunk's quad 0 goes, with the
  // vectors 32 bytes apart instead of 64.
  for (int64_t e = 0; e < 128; ++e) {
    const int64_t full = q8_act_pos(256, e);
    REQUIRE(q8_act_pos(n, whole + e) - whole == (full / 64) * 32 + full % 32);
  }
  // Other remainders stay in element order.
  REQUIRE(q8_act_pos(1184, 1024 + 33) == 1024 + 33);
  REQUIRE(q8_act_pos(1088, 1024 + 5) == 1024 + 5);
}

// The scalar int8 dot of one weight row w (n elements) with n_col activation columns x, against
// dequantise-then-dot on the same int8-rounded activations in double: within an f32 bound.
void check_scalar_vs_dequantised(GgmlType t, const std::vector<uint8_t>& w, int64_t n, int n_col,
                                 const std::vector<float>& x) {
  Q8Buffer q(x, n, n_col);
  std::vector<float> wf(static_cast<size_t>(n));
  quant_kernels(t)->dequantize(w.data(), wf.data(), n);
  std::vector<float> y(n_col, kPoison);
  dot_q8_kernel(t, Q8Isa::scalar)(w.data(), q.view, y.data(), 1);
  const double blocks = double(n / block_elems(t));
  for (int c = 0; c < n_col; ++c) {
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double p = double(wf[size_t(i)]) * double(q8_act_value(q.view, c, i));
      ref += p;
      mag += std::fabs(p);
    }
    const double tol = 8 * (blocks + 8) * FLT_EPSILON * mag;
    INFO("col " << c << " y " << y[c] << " ref " << ref << " tol " << tol);
    REQUIRE(std::isfinite(y[c]));
    REQUIRE(std::fabs(double(y[c]) - ref) <= tol);
  }
}

TEST_CASE("int8 dot: scalar reference matches dequantise-then-dot on the rounded activations", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kTypes) {
    INFO("type " << ggml_type_info(t).name);
    for (int64_t n : {int64_t(256), int64_t(1024), int64_t(2048)}) {
      for (bool wide : {false, true}) {
        INFO("n " << n << " wide " << wide);
        const int n_col = 3;
        auto w = test::random_quant_rows(t, n, 1, rng);
        check_scalar_vs_dequantised(t, w, n, n_col, make_x(n * n_col, rng, wide));
      }
    }
  }
}

TEST_CASE("int8 dot: every ISA equals the scalar reference bit for bit, 1..16 columns", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kTypes) {
    INFO("type " << ggml_type_info(t).name);
    for (int isa = 1; isa < kQ8IsaCount; ++isa)
    for (GridLoad load : grid_loads(t, Q8Isa(isa))) {
      const DotQ8Fn fn = dot_q8_kernel(t, Q8Isa(isa), load);
      if (!fn || !q8_isa_supported(Q8Isa(isa))) continue;
      INFO("isa " << q8_isa_name(Q8Isa(isa)) << " grid " << grid_load_name(load));
      // Blocks of 32: also 36 blocks (gemma3-1b's 1152: a half chunk after the whole 256-element
      // chunks, q8_act.h) and 37 (a tail of 5 blocks in element order), at every column count.
      const bool b32 = block_elems(t) == 32;
      for (int64_t n : {int64_t(256), int64_t(5376), int64_t(b32 ? 1152 : 512), int64_t(b32 ? 1184 : 768)}) {
        for (int n_col : {1, 2, 5, 16}) {
          INFO("n " << n << " cols " << n_col);
          auto w = test::random_quant_rows(t, n, 1, rng);
          auto x = make_x(n * n_col, rng, n_col == 5);
          Q8Buffer q(x, n, n_col);
          std::vector<float> ys(size_t(n_col) * 3, kPoison), yv(size_t(n_col) * 3, kPoison);
          dot_q8_kernel(t, Q8Isa::scalar)(w.data(), q.view, ys.data(), 3);
          fn(w.data(), q.view, yv.data(), 3);
          for (int c = 0; c < n_col; ++c) {
            INFO("col " << c << " scalar " << ys[size_t(3 * c)] << " simd " << yv[size_t(3 * c)]);
            REQUIRE(std::isfinite(ys[size_t(3 * c)]));
            REQUIRE(same_bits(ys[size_t(3 * c)], yv[size_t(3 * c)]));
            REQUIRE(std::isnan(yv[size_t(3 * c + 1)]));  // the stride's gaps stay untouched
          }
        }
      }
    }
  }
}

// The multi-row kernels: every row of a call (1..kQ8MaxRows, with a row pitch larger than a row)
// gets the single-row scalar result, bit for bit, in y[c * stride + r].
TEST_CASE("int8 dot: every ISA's multi-row kernel equals the scalar reference row by row", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kTypes) {
    INFO("type " << ggml_type_info(t).name);
    // Blocks of 32: 35 blocks, a tail of 3 after the whole 256-element chunks.
    const int64_t n = block_elems(t) == 32 ? 1120 : 1024;
    const uint64_t rb = ggml_row_bytes(t, uint64_t(n)), pitch = rb + 64;
    const auto packed = make_raw_rows(t, n, kQ8MaxRows, rng);
    std::vector<uint8_t> w(pitch * kQ8MaxRows);
    for (int r = 0; r < kQ8MaxRows; ++r) std::memcpy(w.data() + r * pitch, packed.data() + r * rb, rb);
    for (int isa = 0; isa < kQ8IsaCount; ++isa)
    for (GridLoad load : grid_loads(t, Q8Isa(isa))) {
      const DotQ8RowsFn fn = dot_q8_rows_kernel(t, Q8Isa(isa), load);
      if (!fn || !q8_isa_supported(Q8Isa(isa))) continue;
      INFO("isa " << q8_isa_name(Q8Isa(isa)) << " grid " << grid_load_name(load));
      for (int n_rows : {1, 3, kQ8MaxRows}) {
        // 2 and 3: either side of the AVX-512 body's switch from ymm to column pairs (dot_q8_zmm.inc);
        // odd counts leave a column paired with itself; 3..16 reach every pair count of its
        // compile-time pair bodies.
        for (int n_col : {1, 2, 3, 4, 5, 7, 9, 11, 13, kQ8MaxCols}) {
          INFO("rows " << n_rows << " cols " << n_col);
          auto x = make_x(n * n_col, rng, true);
          Q8Buffer q(x, n, n_col);
          const int64_t stride = kQ8MaxRows + 1;
          std::vector<float> ys(size_t(n_col * stride), kPoison), yv(size_t(n_col * stride), kPoison);
          for (int r = 0; r < n_rows; ++r)
            dot_q8_kernel(t, Q8Isa::scalar)(w.data() + r * pitch, q.view, ys.data() + r, stride);
          fn(w.data(), int64_t(pitch), n_rows, q.view, yv.data(), stride);
          for (int c = 0; c < n_col; ++c)
            for (int r = 0; r < stride; ++r) {
              const size_t i = size_t(c * stride + r);
              INFO("col " << c << " row " << r << " scalar " << ys[i] << " simd " << yv[i]);
              if (r >= n_rows) {
                REQUIRE(std::isnan(yv[i]));  // rows past n_rows stay untouched
              } else {
                REQUIRE(same_bits(ys[i], yv[i]));
              }
            }
        }
      }
    }
  }
}

TEST_CASE("int8 dot: every ISA equals the scalar reference on random-bytes blocks and saturated activations", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kTypes) {
    INFO("type " << ggml_type_info(t).name);
    // Blocks of 32: 67 blocks, so the Q4_1 / Q5_1 min pass (8 blocks at a time) has a tail.
    const int64_t n = block_elems(t) == 32 ? 2144 : 2048;
    for (int n_col = 1; n_col <= kQ8MaxCols; ++n_col) {
      INFO("cols " << n_col);
      auto w = make_raw_rows(t, n, 1, rng);
      auto x = make_x(n * n_col, rng, false);
      // Column 0 all +-max (every code +-127, every half-group sum +-2032 or mixed): the largest
      // u8 x s8 pair sums the AVX2 path sees.
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = (rng.next_u32() & 1u) ? 1.0f : -1.0f;
      if (n_col > 1)
        for (int64_t i = 0; i < n; ++i) x[size_t(n + i)] = 3.0f;
      Q8Buffer q(x, n, n_col);
      std::vector<float> ys(size_t(n_col), kPoison);
      dot_q8_kernel(t, Q8Isa::scalar)(w.data(), q.view, ys.data(), 1);
      for (int c = 0; c < n_col; ++c) REQUIRE(std::isfinite(ys[size_t(c)]));
      for (int isa = 1; isa < kQ8IsaCount; ++isa)
      for (GridLoad load : grid_loads(t, Q8Isa(isa))) {
        const DotQ8Fn fn = dot_q8_kernel(t, Q8Isa(isa), load);
        if (!fn || !q8_isa_supported(Q8Isa(isa))) continue;
        INFO("isa " << q8_isa_name(Q8Isa(isa)) << " grid " << grid_load_name(load));
        std::vector<float> yv(size_t(n_col), kPoison);
        fn(w.data(), q.view, yv.data(), 1);
        for (int c = 0; c < n_col; ++c) {
          INFO("col " << c << " scalar " << ys[size_t(c)] << " simd " << yv[size_t(c)]);
          REQUIRE(same_bits(ys[size_t(c)], yv[size_t(c)]));
        }
      }
    }
  }
}

// The random-bytes blocks against dequantise-then-dot too (the scalar decoders read every field).
TEST_CASE("int8 dot: scalar reference matches dequantise-then-dot on random-bytes blocks", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kTypes) {
    INFO("type " << ggml_type_info(t).name);
    const int64_t n = block_elems(t) == 32 ? 1120 : 1024;  // 35 blocks of 32: a tail of 3 (see above)
    const int n_col = 2;
    auto w = make_raw_rows(t, n, 1, rng);
    check_scalar_vs_dequantised(t, w, n, n_col, make_x(n * n_col, rng, false));
  }
}

TEST_CASE("int8 dot: multi-column results equal single-column ones", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kTypes) {
    INFO("type " << ggml_type_info(t).name);
    for (int isa = 0; isa < kQ8IsaCount; ++isa)
    for (GridLoad load : grid_loads(t, Q8Isa(isa))) {
      const DotQ8Fn fn = dot_q8_kernel(t, Q8Isa(isa), load);
      if (!fn || !q8_isa_supported(Q8Isa(isa))) continue;
      INFO("isa " << q8_isa_name(Q8Isa(isa)) << " grid " << grid_load_name(load));
      const int64_t n = 1024;
      auto w = test::random_quant_rows(t, n, 1, rng);
      auto x = make_x(n * kQ8MaxCols, rng, false);
      Q8Buffer q(x, n, kQ8MaxCols);
      std::vector<float> multi(kQ8MaxCols, kPoison);
      fn(w.data(), q.view, multi.data(), 1);
      for (int c = 0; c < kQ8MaxCols; ++c) {
        float one = kPoison;
        fn(w.data(), q.view.columns(c, 1), &one, 1);
        REQUIRE(std::isfinite(one));
        REQUIRE(same_bits(one, multi[size_t(c)]));
      }
    }
  }
}

TEST_CASE("matmul_q8: rows over the thread team and column chunks equal per-row kernel calls", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q5_1, GgmlType::IQ4_XS}) {
    const int64_t n_in = 512, n_out = 301;
    auto wb = test::random_quant_rows(t, n_in, n_out, rng);
    const WeightView w{wb.data(), t, n_in, n_out, ggml_row_bytes(t, uint64_t(n_in))};
    for (int64_t n_tok : {int64_t(1), int64_t(7), int64_t(20)}) {
      INFO("type " << ggml_type_info(t).name << " tokens " << n_tok);
      auto x = make_x(n_in * n_tok, rng, false);
      std::vector<float> y(size_t(n_tok * n_out), kPoison);
      matmul_q8(w, x.data(), n_tok, y.data());
      // The same bits from teams of other sizes (the rows cut elsewhere), this machine's core count
      // notwithstanding (the limit and the arena both allow `threads`).
      for (int threads : {1, 3, 8}) {
        std::vector<float> yt(y.size(), kPoison);
        tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
        tbb::task_arena(threads).execute([&] { matmul_q8(w, x.data(), n_tok, yt.data()); });
        int bad = 0;
        for (size_t i = 0; i < y.size(); ++i) bad += !same_bits(y[i], yt[i]);
        CHECK(bad == 0);
      }
      Q8Buffer q(x, n_in, n_tok);
      const DotQ8Fn fn = best_dot_q8(t);
      for (int64_t r = 0; r < n_out; ++r)
        for (int c = 0; c < n_tok; ++c) {
          float one = kPoison;
          fn(w.row(r), q.view.columns(c, 1), &one, 1);
          REQUIRE(std::isfinite(one));
          REQUIRE(same_bits(one, y[size_t(c * n_out + r)]));
        }
      // And close to the exact f32-activation matmul (activation rounding only: a loose bound).
      std::vector<float> ye(size_t(n_tok * n_out), kPoison);
      matmul_dot(w, x.data(), n_tok, ye.data());
      double err = 0, mag = 0;
      for (size_t i = 0; i < ye.size(); ++i) {
        err += std::fabs(double(y[i]) - ye[i]);
        mag += std::fabs(double(ye[i]));
      }
      REQUIRE(err <= 0.02 * mag);
    }
  }
}

TEST_CASE("matmul_q8_group: each matrix of a group equals its own matmul_q8 bit for bit", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  // Q, K, V-like shapes of mixed types (K types, blocks of 32, i-quants), and a large matrix whose
  // tasks are whole row groups; the rows of every matrix are cut differently than matmul_q8 cuts them.
  const int64_t n_in = 512;
  const GgmlType types[3] = {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::IQ4_XS};
  const int64_t rows[3] = {301, 37, 1029};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<WeightView> ws;
  for (int j = 0; j < 3; ++j) bytes.push_back(test::random_quant_rows(types[j], n_in, rows[j], rng));
  for (int j = 0; j < 3; ++j) ws.push_back({bytes[size_t(j)].data(), types[j], n_in, rows[j], ggml_row_bytes(types[j], uint64_t(n_in))});
  for (int count : {2, 3}) {
    for (int64_t n_tok : {int64_t(1), int64_t(5), int64_t(16)}) {
      INFO("matrices " << count << " tokens " << n_tok);
      const auto x = make_x(n_in * n_tok, rng, false);
      std::vector<std::vector<float>> got, want;
      const WeightView* wp[3];
      float* yp[3];
      for (int j = 0; j < count; ++j) {
        got.emplace_back(size_t(n_tok * rows[j]), kPoison);
        want.emplace_back(size_t(n_tok * rows[j]), kPoison);
        matmul_q8(ws[size_t(j)], x.data(), n_tok, want.back().data());
      }
      for (int j = 0; j < count; ++j) wp[j] = &ws[size_t(j)], yp[j] = got[size_t(j)].data();
      matmul_q8_group(wp, yp, count, x.data(), n_tok);
      for (int j = 0; j < count; ++j) {
        int bad = 0;
        for (size_t i = 0; i < got[size_t(j)].size(); ++i)
          bad += !std::isfinite(got[size_t(j)][i]) || !same_bits(got[size_t(j)][i], want[size_t(j)][i]);
        CHECK(bad == 0);
      }
    }
  }
}

// Run also by ctest with STRATA_CPU=scalar and STRATA_CPU=avx2 (tests/CMakeLists.txt).
TEST_CASE("int8 dot: best kernel honours the CPU and the STRATA_CPU cap", "[q8][q8cap]") {
  const char* cap = std::getenv("STRATA_CPU");
  const std::string c = cap ? cap : "";
  for (GgmlType t : kTypes) {
    REQUIRE(has_dot_q8(t));
    const Q8Isa isa = best_dot_q8_isa(t);
    REQUIRE(q8_isa_supported(isa));
    REQUIRE(best_dot_q8(t) == dot_q8_kernel(t, isa));
    REQUIRE(best_dot_q8_rows(t) == dot_q8_rows_kernel(t, isa));
    if (c == "scalar") REQUIRE(isa == Q8Isa::scalar);
    if (c == "avx2") REQUIRE(isa == (cpu_features().avx2 ? Q8Isa::avx2 : Q8Isa::scalar));
    if (c.empty() && cpu_features().avx2) REQUIRE(isa != Q8Isa::scalar);
    if (!c.empty()) REQUIRE_FALSE(q8_isa_supported(Q8Isa::avx_vnni));
  }
  REQUIRE_FALSE(has_dot_q8(GgmlType::F16));
  REQUIRE_FALSE(has_dot_q8(GgmlType::BF16));
  REQUIRE(best_dot_q8(GgmlType::F32) == nullptr);
}

// Run also by ctest with STRATA_IQ3_GRID=gather and =direct (tests/CMakeLists.txt).
TEST_CASE("int8 dot: the IQ3 grid load honours STRATA_IQ3_GRID, else is measured", "[q8][q8grid]") {
  const char* env = std::getenv("STRATA_IQ3_GRID");
  const std::string e = env ? env : "";
  for (GgmlType t : kTypes) {
    INFO("type " << ggml_type_info(t).name);
    const GridLoadPick p = iq3_grid_pick(t);
    REQUIRE(iq3_grid_load(t) == p.load);
    const Q8Isa isa = best_dot_q8_isa(t);
    // The dispatch follows the pick, and the plain kernels are the picked ones.
    REQUIRE(best_dot_q8(t) == dot_q8_kernel(t, isa, p.load));
    REQUIRE(best_dot_q8_rows(t) == dot_q8_rows_kernel(t, isa, p.load));
    REQUIRE(dot_q8_kernel(t, isa) == dot_q8_kernel(t, isa, p.load));
    const bool choice = (t == GgmlType::IQ3_XXS || t == GgmlType::IQ3_S) && isa != Q8Isa::scalar;
    REQUIRE(choice == (dot_q8_kernel(t, isa, GridLoad::gather) != dot_q8_kernel(t, isa, GridLoad::direct)));
    if (!choice) {
      REQUIRE(p.load == GridLoad::gather);
      REQUIRE_FALSE(p.from_env);
    } else if (e == "gather" || e == "direct") {
      REQUIRE(p.from_env);
      REQUIRE(std::string(grid_load_name(p.load)) == e);
    } else {  // measured: both timed, the faster kept
      REQUIRE_FALSE(p.from_env);
      REQUIRE(p.gather_ns > 0);
      REQUIRE(p.direct_ns > 0);
      REQUIRE(p.load == (p.direct_ns < p.gather_ns ? GridLoad::direct : GridLoad::gather));
    }
  }
}
