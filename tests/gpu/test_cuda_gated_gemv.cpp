// The fused FFN gate/up GEMV (kernels/cuda/act_round.h gated_gemv) against the three ops it
// replaces (gemv of gate, gemv of up, both reading x's rounding; gated_act_round with the down
// matrix's rounding): the same floats and the same int8 codes, scales and sums, bit for bit, for
// every type it takes, both activations, both warp splits (8 and 16 per CTA), every way of sharing
// a CTA between the matrices (gemv_tuning.h set_gated_gemv_variant), with programmatic
// dependent launch on and off, on several calls that share the counters (each call must leave
// them zero). Outputs and roundings are poisoned first, so anything the fused kernel fails to
// write fails the comparison. Also: where it does not apply, and bad arguments.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "act_round_test_util.h"
#include "cuda_test_util.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cuda/act_round.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/gemv_tuning.h"
#include "kernels/gpu_layout.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::test;
namespace kc = strata::kernels::cuda;

// A random matrix of type t repacked into the GPU layout, on the device.
struct GpuMatrix {
  DevBuf buf;
  kernels::WeightView view;
  GpuMatrix(GgmlType t, int64_t n_in, int64_t n_out, Rng& rng) : buf(kernels::gpu_layout_bytes(t, n_in, n_out)) {
    const auto* qk = kernels::cpu::quant_kernels(t);
    REQUIRE(qk != nullptr);
    const uint64_t row_bytes = ggml_row_bytes(t, uint64_t(n_in));
    std::vector<uint8_t> gguf(row_bytes * uint64_t(n_out));
    for (int64_t r = 0; r < n_out; ++r) {
      uint8_t* row = gguf.data() + r * row_bytes;
      if (r % 2 == 0) {
        qk->fill_random(row, n_in, rng, 1.0f);
      } else {
        const auto v = random_normal(size_t(n_in), rng);
        qk->quantize(v.data(), row, n_in);
      }
    }
    std::vector<uint8_t> packed(buf.bytes());
    kernels::repack_to_gpu_layout({gguf.data(), t, n_in, n_out, row_bytes}, packed.data());
    buf.upload(packed);
    view = kernels::gpu_layout_view(buf.as<uint8_t>(), t, n_in, n_out);
  }
};

int differing(const void* a, const void* b, size_t n, size_t elem) {
  int k = 0;
  for (size_t i = 0; i < n; ++i) k += std::memcmp(static_cast<const char*>(a) + i * elem, static_cast<const char*>(b) + i * elem, elem) != 0;
  return k;
}

}  // namespace

TEST_CASE("cuda gated_gemv equals gate and up GEMVs then gated_act_round, bit for bit", "[gpu][gemv]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  DevBuf counters(kc::kGatedCounterBytes);
  REQUIRE(cudaMemset(counters.as<void>(), 0, counters.bytes()) == cudaSuccess);
  struct Shape {
    int64_t n_in, n_out;
    GgmlType down;  // the next matrix's type (its GPU layout's lane order for the rounding)
  };
  // 96 rows: 12 row groups, three rounding blocks on a 32-element down chunk (q8_0); 5376 x 1024:
  // the 27B's width; 2816 x 2304: 11 chunks per row, so the warps of a CTA take unequal counts.
  const Shape shapes[] = {{768, 96, GgmlType::Q8_0}, {5376, 1024, GgmlType::Q4_K}, {2816, 2304, GgmlType::Q6_K}};
  for (const GgmlType t : {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K}) {
    for (const Shape& sh : shapes) {
      const GpuMatrix gate(t, sh.n_in, sh.n_out, rng), up(t, sh.n_in, sh.n_out, rng);
      const auto down = kernels::gpu_layout_view(nullptr, sh.down, sh.n_out, 256);
      REQUIRE(kc::gated_gemv_applies(gate.view, up.view, 1));
      const size_t x_bytes = kc::workspace_bytes_for_gemv(gate.view, 1);
      const size_t offset = (x_bytes + 255) / 256 * 256;
      const size_t ws_bytes = offset + kc::workspace_bytes_for_gemv(down, 1);
      for (const int warps : {8, 16}) {
        kc::set_gemv_warps(warps);
        for (const int variant : {0, 1, 2}) {
        kc::set_gated_gemv_variant(variant);
        for (const bool pdl : {false, true}) {
          kc::set_gemv_pdl(pdl);
          for (const bool gelu : {false, true}) {
            INFO("type " << ggml_type_info(t).name << " " << sh.n_in << " x " << sh.n_out << " warps " << warps
                         << " variant " << variant << " pdl " << pdl << " gelu " << gelu);
            const auto x = random_normal(size_t(sh.n_in), rng, 2.0f);
            DevBuf dx = to_device(x), ws_a(ws_bytes), ws_b(ws_bytes), g_a(size_t(sh.n_out) * 4),
                   u_a(size_t(sh.n_out) * 4), g_b(size_t(sh.n_out) * 4);
            ws_a.poison(), ws_b.poison(), g_a.poison(), u_a.poison(), g_b.poison();
            const kc::Workspace wa{ws_a.as<void>(), ws_bytes}, wb{ws_b.as<void>(), ws_bytes};
            const kc::Workspace after_a{ws_a.as<uint8_t>() + offset, ws_bytes - offset};
            const kc::Workspace after_b{ws_b.as<uint8_t>() + offset, ws_bytes - offset};
            const kc::ActRounding ra = kc::act_rounding(down, 1, after_a), rb = kc::act_rounding(down, 1, after_b);
            REQUIRE(ra.q != nullptr);
            // The three ops, as the engine ran them.
            REQUIRE(kc::round_act(dx.as<float>(), sh.n_in, kc::act_rounding(gate.view, 1, wa), nullptr));
            REQUIRE(kc::matmul(gate.view, dx.as<float>(), 1, g_a.as<float>(), wa, nullptr, true));
            REQUIRE(kc::matmul(up.view, dx.as<float>(), 1, u_a.as<float>(), wa, nullptr, true));
            REQUIRE(kc::gated_act_round(gelu, g_a.as<float>(), u_a.as<float>(), sh.n_out, ra, nullptr));
            const auto want = g_a.download<float>(size_t(sh.n_out));
            const Rounded want_r = download(ra, sh.n_out);
            // Fused, three times over the same counters (each call must leave them zero).
            REQUIRE(kc::round_act(dx.as<float>(), sh.n_in, kc::act_rounding(gate.view, 1, wb), nullptr));
            for (int call = 0; call < 3; ++call) {
              INFO("call " << call);
              g_b.poison();
              REQUIRE(cudaMemset(rb.q, 0xff, size_t(sh.n_out)) == cudaSuccess);
              REQUIRE(kc::gated_gemv(gelu, gate.view, up.view, 1, g_b.as<float>(), wb, rb, counters.as<unsigned>(),
                                     nullptr));
              const auto got = g_b.download<float>(size_t(sh.n_out));
              const Rounded got_r = download(rb, sh.n_out);
              CHECK(differing(got.data(), want.data(), got.size(), 4) == 0);
              CHECK(differing(got_r.q.data(), want_r.q.data(), got_r.q.size(), 1) == 0);
              CHECK(differing(got_r.d.data(), want_r.d.data(), got_r.d.size(), 4) == 0);
              CHECK(differing(got_r.s16.data(), want_r.s16.data(), got_r.s16.size(), 4) == 0);
              const auto c = counters.download<unsigned>(kc::kGatedCounterBytes / 4);
              int nonzero = 0;
              for (const unsigned v : c) nonzero += v != 0;
              CHECK(nonzero == 0);
            }
            // Without the down matrix's rounding: the floats alone.
            g_b.poison();
            REQUIRE(kc::gated_gemv(gelu, gate.view, up.view, 1, g_b.as<float>(), wb, kc::ActRounding{},
                                   counters.as<unsigned>(), nullptr));
            const auto got = g_b.download<float>(size_t(sh.n_out));
            CHECK(differing(got.data(), want.data(), got.size(), 4) == 0);
          }
        }
        }
      }
    }
  }
  kc::set_gated_gemv_variant(2);
  kc::set_gemv_warps(0);
  kc::set_gemv_pdl(false);
}

TEST_CASE("cuda gated_gemv: where it does not apply, and bad arguments", "[gpu][gemv]") {
  if (!have_gpu()) return;
  Rng rng(fresh_seed());
  const GpuMatrix gate(GgmlType::Q4_K, 512, 64, rng), up(GgmlType::Q4_K, 512, 64, rng);
  const GpuMatrix up_q3(GgmlType::Q3_K, 512, 64, rng), up_rows(GgmlType::Q4_K, 512, 96, rng);
  const GpuMatrix gate_q6(GgmlType::Q6_K, 512, 64, rng), up_q6(GgmlType::Q6_K, 512, 64, rng);
  CHECK(kc::gated_gemv_applies(gate.view, up.view, 1));
  CHECK_FALSE(kc::gated_gemv_applies(gate.view, up.view, 2));        // one column only
  CHECK_FALSE(kc::gated_gemv_applies(gate.view, up_q3.view, 1));     // two types
  CHECK_FALSE(kc::gated_gemv_applies(gate.view, up_rows.view, 1));   // two shapes
  CHECK_FALSE(kc::gated_gemv_applies(gate_q6.view, up_q6.view, 1));  // a type without the ring reader
  const size_t x_bytes = kc::workspace_bytes_for_gemv(gate.view, 1);
  DevBuf ws(4 * x_bytes), out(64 * 4), counters(kc::kGatedCounterBytes);
  REQUIRE(cudaMemset(counters.as<void>(), 0, counters.bytes()) == cudaSuccess);
  const kc::Workspace w{ws.as<void>(), ws.bytes()};
  const auto down = kernels::gpu_layout_view(nullptr, GgmlType::Q8_0, 64, 256);
  // The output's rounding over x's: refused (other CTAs still read x while it would be written).
  CHECK_FALSE(kc::gated_gemv(false, gate.view, up.view, 1, out.as<float>(), w, kc::act_rounding(down, 1, w),
                             counters.as<unsigned>(), nullptr));
  CHECK_FALSE(kc::gated_gemv(false, gate.view, up.view, 1, nullptr, w, {}, counters.as<unsigned>(), nullptr));
  CHECK_FALSE(kc::gated_gemv(false, gate.view, up.view, 1, out.as<float>(), w, {}, nullptr, nullptr));
  CHECK_FALSE(kc::gated_gemv(false, gate.view, up.view, 1, out.as<float>(), {}, {}, counters.as<unsigned>(), nullptr));
  CHECK_FALSE(kc::gated_gemv(false, gate.view, up_q3.view, 1, out.as<float>(), w, {}, counters.as<unsigned>(), nullptr));
  CHECK(kc::gated_gemv(true, gate.view, up.view, 1, out.as<float>(), w, {}, counters.as<unsigned>(), nullptr));
  CHECK(kc::synchronize(nullptr));
}
