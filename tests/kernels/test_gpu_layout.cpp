// The GPU weight layout (kernels/gpu_layout.h): repacking is exact -- decoding the repacked matrix
// equals the CPU decoders on the GGUF matrix bit for bit, for every repacked type and odd shapes
// (one row, a partial row group, 129 rows; rows of 256..4096 elements and, for the 32-element types,
// odd blocks); the i-quants also on blocks of random bytes (every sign, parity and index pattern)
// and on ggml's test vectors (tests/data/reference/quant).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "core/ggml_type.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/gpu_layout.h"
#include "model/gguf_file.h"
#include "test_util.h"

namespace {

using namespace strata;
namespace k = strata::kernels;

bool gpu_layout_chunk_is_32(GgmlType t) { return k::gpu_layout_chunk(t) == 32; }

const GgmlType kRepacked[] = {GgmlType::Q3_K,    GgmlType::Q4_K,  GgmlType::Q5_K,   GgmlType::Q6_K,  GgmlType::Q8_0,
                              GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ4_XS, GgmlType::IQ4_NL};

bool is_iq(GgmlType t) {
  return t == GgmlType::IQ3_XXS || t == GgmlType::IQ3_S || t == GgmlType::IQ4_XS || t == GgmlType::IQ4_NL;
}

// Random bytes with a finite f16 d (its bytes at the block's start; no NaN or infinity, whose
// payloads the decoders need not agree on): every index, sign, parity and scale pattern.
void random_block_bytes(GgmlType t, uint8_t* row, int64_t n_in, Rng& rng) {
  const auto& info = ggml_type_info(t);
  const uint64_t bb = info.type_size;
  for (int64_t b = 0; b < n_in / info.block_size; ++b) {
    uint8_t* p = row + uint64_t(b) * bb;
    for (uint64_t i = 0; i < bb; ++i) p[i] = uint8_t(rng.next_u64());
    const uint16_t d = uint16_t(0x2000 + rng.next_u64() % 0x2000);  // about 2^-7 .. 2^1, either sign
    const uint16_t ds = uint16_t(d | ((rng.next_u64() & 1) << 15));
    std::memcpy(p, &ds, 2);
  }
}

// Repacks the GGUF rows and compares the decode of every row with the CPU decoder, bit for bit;
// padding rows of the last group decode to zeros.
void check_roundtrip(GgmlType t, const uint8_t* gguf, int64_t n_in, int64_t n_out) {
  INFO("type " << ggml_type_info(t).name << " n_in " << n_in << " n_out " << n_out);
  const uint64_t rb = ggml_row_bytes(t, uint64_t(n_in));
  const k::WeightView src{gguf, t, n_in, n_out, rb};
  const uint64_t bytes = k::gpu_layout_bytes(t, n_in, n_out);
  REQUIRE(bytes > 0);
  REQUIRE(bytes % 16 == 0);
  REQUIRE(bytes == uint64_t((n_out + 7) / 8) * uint64_t(n_in / k::gpu_layout_chunk(t)) *
                       uint64_t(k::gpu_layout_tile_bytes(t)));
  // The layout costs no bytes: 8 rows' GGUF blocks per tile.
  REQUIRE(uint64_t(k::gpu_layout_tile_bytes(t)) ==
          8 * ggml_row_bytes(t, uint64_t(k::gpu_layout_chunk(t))));
  std::vector<uint8_t> packed(bytes, 0xA5);  // poison: every byte must be written
  k::repack_to_gpu_layout(src, packed.data());
  const k::WeightView gv = k::gpu_layout_view(packed.data(), t, n_in, n_out);
  CHECK(gv.layout == k::WeightLayout::kGpu);
  const auto* qk = k::cpu::quant_kernels(t);
  std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
  int bad_rows = 0;
  for (int64_t r = 0; r < n_out; ++r) {
    qk->dequantize(src.row(r), want.data(), n_in);
    std::fill(got.begin(), got.end(), -12345.0f);
    k::dequantize_gpu_layout_row(gv, r, got.data());
    if (std::memcmp(want.data(), got.data(), want.size() * 4) != 0) ++bad_rows;
  }
  CHECK(bad_rows == 0);
  if (n_out % 8 != 0) {
    k::WeightView pad = gv;
    pad.n_out = (n_out + 7) / 8 * 8;
    k::dequantize_gpu_layout_row(pad, pad.n_out - 1, got.data());
    for (float v : got) REQUIRE(v == 0.0f);
  }
}

// Even rows from fill_random (every code and scale pattern), odd rows quantised from normal data.
std::vector<uint8_t> make_rows(GgmlType t, int64_t n_in, int64_t n_out, Rng& rng) {
  const auto* qk = k::cpu::quant_kernels(t);
  REQUIRE(qk != nullptr);
  const uint64_t rb = ggml_row_bytes(t, uint64_t(n_in));
  std::vector<uint8_t> bytes(rb * uint64_t(n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    uint8_t* row = bytes.data() + uint64_t(r) * rb;
    if (r % 2 == 0) {
      qk->fill_random(row, n_in, rng, 1.0f);
    } else {
      const auto v = test::random_normal(size_t(n_in), rng);
      qk->quantize(v.data(), row, n_in);
    }
  }
  return bytes;
}

}  // namespace

TEST_CASE("gpu layout: repacked matrices decode to the GGUF values bit for bit", "[gpu_layout]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kRepacked) {
    const bool q8 = gpu_layout_chunk_is_32(t);
    for (int64_t n_in : {int64_t(256), int64_t(768), int64_t(4096), q8 ? int64_t(32 * 7) : int64_t(1280)}) {
      for (int64_t n_out : {1, 3, 129}) {
        const auto gguf = make_rows(t, n_in, n_out, rng);
        check_roundtrip(t, gguf.data(), n_in, n_out);
      }
    }
  }
}

TEST_CASE("gpu layout: i-quant blocks of random bytes round-trip bit for bit", "[gpu_layout]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kRepacked) {
    if (!is_iq(t)) continue;
    const int64_t c = k::gpu_layout_chunk(t);
    for (const auto& [n_in, n_out] : {std::pair<int64_t, int64_t>{c, 1}, {3 * c, 13}, {c * 37, 8}, {5376, 29}}) {
      const uint64_t rb = ggml_row_bytes(t, uint64_t(n_in));
      std::vector<uint8_t> gguf(rb * uint64_t(n_out));
      for (int64_t r = 0; r < n_out; ++r) random_block_bytes(t, gguf.data() + uint64_t(r) * rb, n_in, rng);
      check_roundtrip(t, gguf.data(), n_in, n_out);
    }
  }
}

TEST_CASE("gpu layout: ggml's i-quant test vectors round-trip bit for bit", "[gpu_layout]") {
  for (const char* f : {"iq3_xxs.gguf", "iq3_s.gguf", "iq4_xs.gguf", "iq4_nl.gguf"}) {
    INFO(f);
    auto opened = gguf::File::open(test::testdata(std::string("quant/") + f));
    REQUIRE(opened.is_ok());
    const gguf::TensorInfo* quant = opened.value().find_tensor("quant");
    REQUIRE(quant != nullptr);
    REQUIRE(quant->data != nullptr);
    check_roundtrip(quant->type, quant->data, int64_t(quant->ne[0]), int64_t(quant->rows()));
  }
}

TEST_CASE("gpu layout: types that are not repacked report 0 bytes", "[gpu_layout]") {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q2_K, GgmlType::Q5_1})
    CHECK(k::gpu_layout_bytes(t, 256, 8) == 0);
  CHECK(k::gpu_layout_bytes(GgmlType::Q4_K, 300, 8) == 0);  // not whole super-blocks
  CHECK(k::gpu_layout_bytes(GgmlType::Q8_0, 32, 1) == 272);
  CHECK(k::gpu_layout_bytes(GgmlType::Q4_K, 256, 9) == 2 * 1152);  // 9 rows: two row groups of 8 x 144 B
}
