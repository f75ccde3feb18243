// The i-quants' CPU kernels on fresh random inputs (the seed is printed on failure; set
// STRATA_TEST_SEED to replay): every row is wired, the scalar dot equals the exact dot of the
// decoded row, fill_random has the requested statistics and is deterministic, and the grid tables
// hold ggml-common.h's values at spot entries. (Bit-exact decoding against ggml is in
// test_quant_reference.cpp; SIMD dots against the scalar ones in test_dot.cpp.) best_dot honours
// the CPU and the STRATA_CPU cap.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "kernels/cpu/quant/iq_grids.h"
#include "kernels/cpu/quant_kernels.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::kernels::cpu;

constexpr GgmlType kIqTypes[] = {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,
                                 GgmlType::IQ3_XXS, GgmlType::IQ3_S,  GgmlType::IQ1_S,
                                 GgmlType::IQ1_M,   GgmlType::IQ4_NL, GgmlType::IQ4_XS};

std::string type_name(GgmlType t) { return std::string(ggml_type_info(t).name); }
size_t row_bytes(GgmlType t, int64_t n) { return size_t(ggml_row_bytes(t, uint64_t(n))); }

}  // namespace

TEST_CASE("iq: every i-quant has a kernel row", "[quant][iq]") {
  for (const GgmlType t : kIqTypes) {
    INFO(type_name(t));
    const QuantKernels* k = quant_kernels(t);
    REQUIRE(k != nullptr);
    CHECK(k->type == t);
    CHECK(k->dequantize != nullptr);
    CHECK(k->fill_random != nullptr);
    CHECK(k->dot[int(Isa::scalar)] != nullptr);
    CHECK(best_dot(t) != nullptr);
    CHECK(best_dequantize(t) == k->dequantize);
    CHECK(ggml_type_info(t).has_cpu_kernels);
  }
}

// best_dot takes the highest ISA that has a kernel and that this CPU (under the STRATA_CPU cap)
// supports; every i-quant but IQ1_S has an AVX-512 dot, and STRATA_CPU=avx2 / scalar must keep it
// off (ctest also runs this under those caps).
TEST_CASE("iq: best_dot is the highest supported ISA's kernel", "[quant][iq][dot]") {
  const char* cap = std::getenv("STRATA_CPU");
  const std::string cap_s = cap ? cap : "";
  for (const GgmlType t : kIqTypes) {
    INFO(type_name(t) << " cap '" << cap_s << "'");
    const QuantKernels& k = *quant_kernels(t);
    CHECK(k.dot[int(Isa::avx2)] != nullptr);
    CHECK((k.dot[int(Isa::avx512)] != nullptr) == (t != GgmlType::IQ1_S));
    DotFn want = k.dot[int(Isa::scalar)];
    for (int isa = 1; isa < kIsaCount; ++isa) {
      if (k.dot[isa] && isa_supported(Isa(isa))) want = k.dot[isa];
    }
    CHECK(best_dot(t) == want);
    if (cap_s == "avx2" && isa_supported(Isa::avx2)) CHECK(best_dot(t) == k.dot[int(Isa::avx2)]);
    if (cap_s == "scalar") CHECK(best_dot(t) == k.dot[int(Isa::scalar)]);
  }
}

TEST_CASE("iq: grid tables hold ggml-common.h's values", "[quant][iq]") {
  // Entries read off ggml/src/ggml-common.h (a sample at different offsets of each table); every
  // table as a whole is exercised by the bit-exact decode of the reference data.
  CHECK(kIq2xxsGrid.v[0] == 0x0808080808080808ull);
  CHECK(kIq2xxsGrid.v[1] == 0x080808080808082bull);
  CHECK(kIq2xsGrid.v[254] == 0x1908080808080819ull);
  CHECK(kIq2xsGrid.v[500] == 0x2b2b2b08082b0808ull);
  CHECK(kIq2xsGrid.v[511] == 0x2b2b2b2b2b2b2b2bull);
  CHECK(kIq2sGrid.v[7] == 0x080808080819192bull);
  CHECK(kIq2sGrid.v[260] == 0x081908192b080808ull);
  CHECK(kIq3xxsGrid.v[0] == 0x04040404u);
  CHECK(kIq3xxsGrid.v[1] == 0x04040414u);
  CHECK(kIq3sGrid.v[64] == 0x01070703u);
  CHECK(kIq3sGrid.v[511] == 0x0f0f0101u);
  CHECK(kIq1sGrid.v[1] == 0xffffffffffffff01ull);
  CHECK(kIq1sGrid.v[88] == 0xffff0000ffff0000ull);
  CHECK(kIq1sGrid.v[436] == 0xff00010101ff0000ull);
  // ksigns: even parity in all 8 bits, low 7 bits the index.
  for (int i = 0; i < 128; ++i) {
    CHECK((kKsignsIq2xs.v[i] & 127) == i);
    CHECK(__builtin_popcount(kKsignsIq2xs.v[i]) % 2 == 0);
  }
  CHECK(kValuesIq4nl[0] == -127);
  CHECK(kValuesIq4nl[15] == 113);
}

// Weights decode exactly and activations are f32: the dot differs from exact math only by f32
// rounding, at most ~n * eps * sum |w * x| for any summation order.
TEST_CASE("iq: scalar dot equals the exact dot of the decoded row", "[quant][iq]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const GgmlType t : kIqTypes) {
    INFO(type_name(t));
    const QuantKernels& k = *quant_kernels(t);
    for (const int64_t n : {int64_t(256), int64_t(1024), int64_t(5376)}) {
      INFO("n " << n);
      std::vector<uint8_t> row(row_bytes(t, n));
      k.fill_random(row.data(), n, rng, 0.05f);
      std::vector<float> w(static_cast<size_t>(n), std::nanf(""));
      k.dequantize(row.data(), w.data(), n);
      const std::vector<float> x = test::random_normal(size_t(n), rng);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(w[size_t(i)]) * x[size_t(i)];
        mag += std::fabs(double(w[size_t(i)]) * x[size_t(i)]);
      }
      REQUIRE(std::isfinite(exact));
      const float got = k.dot[int(Isa::scalar)](row.data(), x.data(), n);
      INFO("exact " << exact << " got " << got);
      CHECK(std::fabs(double(got) - exact) <= double(n) * FLT_EPSILON * mag + 1e-30);
      // A dot that ignored the last block would pass the bound only if that block's share were
      // tiny; make sure each block matters by changing one weight's activation.
      std::vector<float> x2 = x;
      x2[size_t(n - 1)] += 1000.0f;
      const float got2 = k.dot[int(Isa::scalar)](row.data(), x2.data(), n);
      CHECK(std::fabs(double(got2) - double(got) - 1000.0 * w[size_t(n - 1)]) <=
            double(n) * FLT_EPSILON * (mag + 1000.0 * std::fabs(w[size_t(n - 1)])) * 2 + 1e-30);
    }
  }
}

TEST_CASE("iq: fill_random statistics and determinism", "[quant][iq]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  const int64_t n = 64 * 1024;
  for (const GgmlType t : kIqTypes) {
    INFO(type_name(t));
    const QuantKernels& k = *quant_kernels(t);
    for (const float std_req : {0.02f, 1.0f, 0.005f}) {
      INFO("std " << std_req);
      std::vector<uint8_t> a(row_bytes(t, n)), b(a.size());
      Rng r1(seed, 1), r2(seed, 1), r3(seed + 1, 1);
      k.fill_random(a.data(), n, r1, std_req);
      k.fill_random(b.data(), n, r2, std_req);
      CHECK(a == b);
      k.fill_random(b.data(), n, r3, std_req);
      CHECK(a != b);
      std::vector<float> y(static_cast<size_t>(n), std::nanf(""));
      k.dequantize(a.data(), y.data(), n);
      double sum = 0, sum2 = 0;
      for (float v : y) {
        REQUIRE(std::isfinite(v));
        sum += v;
        sum2 += double(v) * v;
      }
      const double mean = sum / double(n);
      const double sd = std::sqrt(sum2 / double(n) - mean * mean);
      CHECK(std::fabs(mean) <= 0.05 * std_req);
      CHECK(sd >= 0.75 * std_req);
      CHECK(sd <= 1.25 * std_req);
    }
  }
}
