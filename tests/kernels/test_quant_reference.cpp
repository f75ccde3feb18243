// strata's quant kernels against ggml's, on the independent test data (tests/data/reference/quant,
// made by llama.cpp: see its README). For every type strata supports:
//   - decode: dequantising ggml's `quant` reproduces ggml's `deq` bit for bit (1 ulp allowed, for
//     a build of ggml that fused a multiply-add);
//   - quantiser quality: quantising `src` with strata's quantiser and decoding it gives, row by
//     row, a sum of squared errors no worse than ggml's own (|deq - src|) by more than 5%; an
//     all-zero row must come back exactly zero.
// The i-quants' grid types (iq3_*, iq2_*, iq1_*) have no quantiser in strata (ggml's need an
// importance matrix): for those only the decode is checked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "kernels/cpu/quant_kernels.h"
#include "model/gguf_file.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::kernels::cpu;

struct RefFile {
  const char* file;  // under testdata/quant/
  GgmlType type;
};

constexpr RefFile kFiles[] = {
    {"f16.gguf", GgmlType::F16},   {"bf16.gguf", GgmlType::BF16}, {"q4_0.gguf", GgmlType::Q4_0},
    {"q4_1.gguf", GgmlType::Q4_1}, {"q5_0.gguf", GgmlType::Q5_0}, {"q5_1.gguf", GgmlType::Q5_1},
    {"q8_0.gguf", GgmlType::Q8_0}, {"q2_k.gguf", GgmlType::Q2_K}, {"q3_k.gguf", GgmlType::Q3_K},
    {"q4_k.gguf", GgmlType::Q4_K}, {"q5_k.gguf", GgmlType::Q5_K}, {"q6_k.gguf", GgmlType::Q6_K},
    {"iq4_nl.gguf", GgmlType::IQ4_NL}, {"iq4_xs.gguf", GgmlType::IQ4_XS},
    {"iq3_xxs.gguf", GgmlType::IQ3_XXS}, {"iq3_s.gguf", GgmlType::IQ3_S},
    {"iq2_xxs.gguf", GgmlType::IQ2_XXS}, {"iq2_xs.gguf", GgmlType::IQ2_XS},
    {"iq2_s.gguf", GgmlType::IQ2_S}, {"iq1_s.gguf", GgmlType::IQ1_S}, {"iq1_m.gguf", GgmlType::IQ1_M},
};

// Distance in representable floats (same sign assumed; a sign change counts as far).
int64_t ulp_distance(float a, float b) {
  if (std::memcmp(&a, &b, sizeof(float)) == 0) return 0;
  if (a == b) return 0;  // +0 / -0
  if ((a < 0) != (b < 0)) return INT64_MAX;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(int64_t(ia) - int64_t(ib));
}

struct Tensors {
  gguf::File file;
  const gguf::TensorInfo* src;
  const gguf::TensorInfo* quant;
  const gguf::TensorInfo* deq;
};

Tensors open_ref(const RefFile& rf) {
  const std::string path = test::testdata(std::string("quant/") + rf.file);
  auto opened = gguf::File::open(path);
  INFO(path);
  REQUIRE(opened.is_ok());
  gguf::File file = std::move(opened).value();
  const gguf::TensorInfo* src = file.find_tensor("src");
  const gguf::TensorInfo* quant = file.find_tensor("quant");
  const gguf::TensorInfo* deq = file.find_tensor("deq");
  REQUIRE(src != nullptr);
  REQUIRE(quant != nullptr);
  REQUIRE(deq != nullptr);
  REQUIRE(src->type == GgmlType::F32);
  REQUIRE(deq->type == GgmlType::F32);
  REQUIRE(src->ne == quant->ne);
  REQUIRE(deq->ne == quant->ne);
  REQUIRE(src->data != nullptr);
  REQUIRE(quant->data != nullptr);
  REQUIRE(deq->data != nullptr);
  // Pointers into the mapping stay valid when the File moves (the mapping is shared).
  return Tensors{std::move(file), src, quant, deq};
}

}  // namespace

TEST_CASE("quant reference: file type matches its name and testdata.type", "[quant]") {
  for (const RefFile& rf : kFiles) {
    INFO(rf.file);
    Tensors t = open_ref(rf);
    CHECK(t.quant->type == rf.type);
    auto name = t.file.get_string("testdata.type");
    REQUIRE(name.is_ok());
    const auto from_meta = ggml_type_from_name(name.value());
    REQUIRE(from_meta.has_value());
    CHECK(*from_meta == rf.type);
    CHECK(quant_kernels(rf.type) != nullptr);
  }
}

TEST_CASE("quant reference: dequantize reproduces ggml's to_float", "[quant]") {
  for (const RefFile& rf : kFiles) {
    INFO(rf.file);
    Tensors t = open_ref(rf);
    const QuantKernels* k = quant_kernels(t.quant->type);
    REQUIRE(k != nullptr);
    const int64_t n = int64_t(t.quant->ne[0]);
    const int64_t rows = int64_t(t.quant->rows());
    const uint64_t row_bytes = ggml_row_bytes(t.quant->type, uint64_t(n));
    REQUIRE(row_bytes * uint64_t(rows) == t.quant->n_bytes);
    const float* want = reinterpret_cast<const float*>(t.deq->data);
    std::vector<float> got(static_cast<size_t>(n));
    int64_t off_by_one = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(got.begin(), got.end(), std::nanf(""));  // poison: unwritten elements fail
      k->dequantize(t.quant->data + r * row_bytes, got.data(), n);
      for (int64_t c = 0; c < n; ++c) {
        const float w = want[r * n + c];
        const int64_t d = ulp_distance(got[size_t(c)], w);
        if (d > 1) {
          FAIL_CHECK("first mismatch at row " << r << " col " << c << ": strata " << got[size_t(c)]
                                              << " ggml " << w);
          break;
        }
        off_by_one += d;
      }
    }
    if (off_by_one > 0) WARN(rf.file << ": " << off_by_one << " values 1 ulp from ggml's");
  }
}

TEST_CASE("quant reference: quantiser error per row is within 5% of ggml's", "[quant]") {
  for (const RefFile& rf : kFiles) {
    INFO(rf.file);
    Tensors t = open_ref(rf);
    const QuantKernels* k = quant_kernels(t.quant->type);
    REQUIRE(k != nullptr);
    if (!k->quantize) continue;
    const int64_t n = int64_t(t.quant->ne[0]);
    const int64_t rows = int64_t(t.quant->rows());
    const float* src = reinterpret_cast<const float*>(t.src->data);
    const float* ggml_deq = reinterpret_cast<const float*>(t.deq->data);
    std::vector<uint8_t> q(ggml_row_bytes(t.quant->type, uint64_t(n)));
    std::vector<float> y(static_cast<size_t>(n));
    std::vector<double> ratios;
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = src + r * n;
      k->quantize(x, q.data(), n);
      std::fill(y.begin(), y.end(), std::nanf(""));
      k->dequantize(q.data(), y.data(), n);
      double ours = 0, theirs = 0, energy = 0;
      bool all_zero = true;
      for (int64_t c = 0; c < n; ++c) {
        const double e = double(y[size_t(c)]) - x[c];
        const double g = double(ggml_deq[r * n + c]) - x[c];
        ours += e * e;
        theirs += g * g;
        energy += double(x[c]) * x[c];
        all_zero = all_zero && x[c] == 0.0f;
      }
      INFO("row " << r << ": strata sse " << ours << ", ggml sse " << theirs << ", row energy "
                  << energy);
      REQUIRE(std::isfinite(ours));
      if (all_zero) {
        for (int64_t c = 0; c < n; ++c) REQUIRE(y[size_t(c)] == 0.0f);
        continue;
      }
      // The epsilon only matters where ggml is (nearly) exact: 1e-12 of the row's energy is far
      // below any quantisation error, and above the noise of summing it.
      CHECK(ours <= theirs * 1.05 + 1e-12 * energy);
      if (theirs > 0) ratios.push_back(ours / theirs);
    }
    if (!ratios.empty()) {
      std::sort(ratios.begin(), ratios.end());
      WARN(rf.file << ": strata/ggml squared error per row: min " << ratios.front() << ", median "
                   << ratios[ratios.size() / 2] << ", max " << ratios.back());
    }
  }
}
