// Every dot kernel (type x ISA) against the scalar kernel and against exact math.
//
// Tolerance. Weights decode exactly to f32 and activations are f32, so a dot differs from the
// exact sum only by f32 rounding of the products and the accumulation: with any summation order
// that error is at most ~n * eps * sum_i |w_i * x_i| (Higham's bound for recursive / blocked
// summation; scaling by sub-block factors adds a few eps per term). We allow 4x that:
//   tol = 4 * n * FLT_EPSILON * sum_i |w_i * x_i|,
// against a double-precision reference (dequantize, then dot in double). A decode bug (a wrong
// nibble, scale or bit) moves the result by ~|w_i * x_i| for some i, far above tol for these n.
// Kernel vs scalar kernel: each is within tol of exact, so they agree within 2 * tol.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "kernels/cpu/quant_kernels.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::kernels::cpu;

std::vector<GgmlType> types_with_kernels() {
  std::vector<GgmlType> out;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto info = ggml_type_info(id);
    if (info && quant_kernels(info->type) != nullptr) out.push_back(info->type);
  }
  return out;
}

// Bytes with room to place the data at a chosen offset from a 64-byte boundary.
struct OffsetBuffer {
  std::vector<uint8_t> storage;
  uint8_t* data;
  OffsetBuffer(size_t bytes, size_t offset) : storage(bytes + 128) {
    auto base = reinterpret_cast<uintptr_t>(storage.data());
    data = reinterpret_cast<uint8_t*>((base + 63) / 64 * 64 + offset);
  }
};

enum class XKind { normal, wide_range };

std::vector<float> make_x(int64_t n, XKind kind, Rng& rng) {
  std::vector<float> x = test::random_normal(size_t(n), rng);
  if (kind == XKind::wide_range) {  // magnitudes spread over 2^-16 .. 2^16
    for (auto& v : x) v *= std::exp2(rng.uniform(-16.0f, 16.0f));
  }
  return x;
}

// Element counts to try for a type: one block, a few blocks, and a 5376-long row (a real hidden
// size; 21 super-blocks of 256). Block-size-1 types also get counts that leave SIMD tails.
std::vector<int64_t> sizes_for(uint32_t block) {
  std::vector<int64_t> s = {int64_t(block), 3 * int64_t(block), 5376};
  if (block == 1) s.insert(s.end(), {7, 15, 37, 1003});
  if (block == 32) s.push_back(13 * 32);  // odd block count (kernels pair blocks up)
  return s;
}

}  // namespace

TEST_CASE("dot kernels match the scalar kernel and exact math", "[dot]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);

  for (int isa_i = 1; isa_i < kIsaCount; ++isa_i) {
    if (!isa_supported(Isa(isa_i))) WARN("skipping ISA " << isa_name(Isa(isa_i)) << ": not supported here");
  }

  for (const GgmlType type : types_with_kernels()) {
    const QuantKernels& k = *quant_kernels(type);
    const GgmlTypeInfo& info = ggml_type_info(type);
    INFO("type " << info.name);
    REQUIRE(k.dot[int(Isa::scalar)] != nullptr);

    for (int isa_i = 1; isa_i < kIsaCount; ++isa_i) {
      const Isa isa = Isa(isa_i);
      if (!isa_supported(isa) || k.dot[isa_i] == nullptr) continue;
      INFO("isa " << isa_name(isa));

      for (const int64_t n : sizes_for(info.block_size)) {
        for (const bool from_quantize : {false, true}) {
          if (from_quantize && !k.quantize) continue;  // grid i-quants: codes from fill_random only
          for (const XKind xk : {XKind::normal, XKind::wide_range}) {
            // misaligned: the row only as aligned as the contract promises (quant_kernels.h: 4
            // bytes for f32, 2 for every other type: what GGUF data and whole blocks give), not
            // to a vector boundary; x one float past a 64-byte boundary
            for (const bool misaligned : {false, true}) {
              INFO("n " << n << (from_quantize ? " quantize(normal)" : " fill_random")
                        << (xk == XKind::wide_range ? " wide-range x" : " normal x")
                        << (misaligned ? " misaligned" : " aligned"));
              const size_t bytes = ggml_row_bytes(type, uint64_t(n));
              OffsetBuffer row(bytes, misaligned ? (type == GgmlType::F32 ? 4 : 2) : 0);
              if (from_quantize) {
                const std::vector<float> w = test::random_normal(size_t(n), rng, 0.02f);
                k.quantize(w.data(), row.data, n);
              } else {
                k.fill_random(row.data, n, rng, 0.02f);
              }
              const std::vector<float> xv = make_x(n, xk, rng);
              OffsetBuffer xbuf(size_t(n) * sizeof(float), misaligned ? sizeof(float) : 0);
              float* x = reinterpret_cast<float*>(xbuf.data);
              std::copy(xv.begin(), xv.end(), x);

              std::vector<float> w(static_cast<size_t>(n));
              k.dequantize(row.data, w.data(), n);
              double exact = 0, mag = 0;
              for (int64_t i = 0; i < n; ++i) {
                exact += double(w[size_t(i)]) * double(x[i]);
                mag += std::fabs(double(w[size_t(i)]) * double(x[i]));
              }
              const double tol = 4.0 * double(n) * FLT_EPSILON * mag;

              const float got = k.dot[isa_i](row.data, x, n);
              const float ref = k.dot[int(Isa::scalar)](row.data, x, n);
              INFO("got " << got << " scalar " << ref << " exact " << exact << " tol " << tol);
              CHECK(std::isfinite(got));
              CHECK(std::fabs(double(got) - exact) <= tol);
              CHECK(std::fabs(double(got) - double(ref)) <= 2 * tol);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("best_dequantize decodes every f16 value as the scalar decoder does", "[dot]") {
  // All 65536 bit patterns, in rows whose lengths leave a tail after the 8-wide SIMD loop.
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
  const DequantizeFn fast = best_dequantize(GgmlType::F16);
  const DequantizeFn scalar = quant_kernels(GgmlType::F16)->dequantize;
  REQUIRE(fast);
  for (int64_t row : {int64_t(65536), int64_t(13), int64_t(7)}) {
    INFO("row length " << row);
    std::vector<float> a(all.size()), b(all.size());
    for (int64_t i0 = 0; i0 < int64_t(all.size()); i0 += row) {
      const int64_t n = std::min<int64_t>(row, int64_t(all.size()) - i0);
      fast(all.data() + i0, a.data() + i0, n);
      scalar(all.data() + i0, b.data() + i0, n);
    }
    int64_t mismatches = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (std::isnan(b[i])) mismatches += !std::isnan(a[i]);
      else mismatches += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;  // -0 and +0 differ here
    }
    CHECK(mismatches == 0);
  }
  // Types without a SIMD decoder get the exact one.
  CHECK(best_dequantize(GgmlType::Q4_K) == quant_kernels(GgmlType::Q4_K)->dequantize);
}

TEST_CASE("best_dequantize decodes q8_0 and q4_1 blocks as the scalar decoder does", "[dot]") {
  // Random bytes as blocks: every code, and scales (and q4_1 offsets) of any f16 bit pattern,
  // infinities, NaNs and subnormals included; rows of 1, 3 and 4 blocks (a 128-dim KV head).
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_1}) {
    INFO(ggml_type_info(t).name);
    const DequantizeFn fast = best_dequantize(t), scalar = quant_kernels(t)->dequantize;
    REQUIRE(fast);
    if (!isa_supported(Isa::avx2)) CHECK(fast == scalar);
    for (int64_t n : {int64_t(32), int64_t(96), int64_t(128)}) {
      const int64_t rows = 4096 / n * 8;
      std::vector<uint8_t> w(ggml_row_bytes(t, uint64_t(n)) * uint64_t(rows));
      for (auto& b : w) b = uint8_t(rng.next_u32());
      std::vector<float> a(size_t(n * rows)), b(a.size());
      const size_t rb = ggml_row_bytes(t, uint64_t(n));
      for (int64_t r = 0; r < rows; ++r) {
        fast(w.data() + r * rb, a.data() + r * n, n);
        scalar(w.data() + r * rb, b.data() + r * n, n);
      }
      int64_t mismatches = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(b[i])) mismatches += !std::isnan(a[i]);
        else mismatches += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
      }
      CHECK(mismatches == 0);
    }
  }
}
