// Activations rounded by the kernel that produces them (kernels/cuda/act_round.h): the norm and the
// gated activation must leave in the workspace exactly the int8 codes, scales and sums that the
// GEMV's own quantiser makes of the same floats (round_act, the quantiser matmul runs), in each
// lane order (element order, 32- and 256-element chunks), and the same floats as the plain ops.
// Workspaces are poisoned first, so a byte the fused kernel failed to write fails the comparison.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "act_round_test_util.h"
#include "cuda_test_util.h"
#include "kernels/cuda/act_round.h"
#include "kernels/cuda/cuda_api.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::test;
namespace kc = strata::kernels::cuda;

// A matrix whose GEMV reads rows of n_in from a rounding in ws (its data is never read here).
kernels::WeightView matrix_view(const DevBuf& any, GgmlType type, kernels::WeightLayout layout, int64_t n_in) {
  kernels::WeightView w;
  w.data = any.as<uint8_t>();
  w.type = type, w.n_in = n_in, w.n_out = 256, w.layout = layout;
  w.row_bytes = ggml_row_bytes(type, uint64_t(n_in));
  return w;
}

// Two poisoned workspaces and the rounding matmul(w, ..., n_cols) would make in each: one for the
// fused kernel, one for the plain op followed by round_act.
struct RoundingPair {
  size_t bytes;
  DevBuf ws_a, ws_b;
  kc::ActRounding a, b;
  RoundingPair(const kernels::WeightView& w, int n_cols)
      : bytes(kc::workspace_bytes_for_gemv(w, n_cols)), ws_a(bytes), ws_b(bytes) {
    ws_a.poison(), ws_b.poison();
    a = kc::act_rounding(w, n_cols, {ws_a.as<void>(), bytes});
    b = kc::act_rounding(w, n_cols, {ws_b.as<void>(), bytes});
    REQUIRE(a.q != nullptr);
  }
  void check_equal(int64_t n) const { check_same(download(a, n), download(b, n)); }
};

struct Target {
  GgmlType type;
  kernels::WeightLayout layout;
  int perm_chunk;
};
// Element order (GGUF q4_K), the 32-element lane order (GPU q8_0), the 256-element one (GPU q4_K).
const Target kTargets[] = {{GgmlType::Q4_K, kernels::WeightLayout::kGguf, 0},
                           {GgmlType::Q8_0, kernels::WeightLayout::kGpu, 32},
                           {GgmlType::Q4_K, kernels::WeightLayout::kGpu, 256}};

}  // namespace

TEST_CASE("cuda rms_norm_round: the norm's floats and the GEMV quantiser's codes, bit for bit", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  DevBuf any(4096);
  for (const Target& t : kTargets) {
    // 256: one float4 per thread; 5376: the 27B's width (two per thread); 13824: four per thread.
    for (const int64_t n : {256, 5376, 13824}) {
      for (const int64_t n_vec : {1, 3, 16}) {
        INFO("type " << ggml_type_info(t.type).name << " chunk " << t.perm_chunk << " n " << n << " n_vec " << n_vec);
        const auto w = matrix_view(any, t.type, t.layout, n);
        const RoundingPair rp(w, int(n_vec));
        const kc::ActRounding &ra = rp.a, &rb = rp.b;
        CHECK(ra.perm_chunk == t.perm_chunk);
        CHECK(ra.key == kc::matmul_act_key(w, int(n_vec), {rp.ws_a.as<void>(), rp.bytes}));
        const auto x = random_normal(size_t(n_vec * n), rng, 3.0f);
        auto g = random_normal(size_t(n), rng);
        g[0] = 0.0f;  // a zero element in every row's first block
        DevBuf dx = to_device(x), dg = to_device(g), out_a(x.size() * 4), out_b(x.size() * 4);
        out_a.poison(), out_b.poison();
        REQUIRE(kc::rms_norm_round(dx.as<float>(), dg.as<float>(), n_vec, n, 1e-6f, out_a.as<float>(), ra, nullptr));
        REQUIRE(kc::rms_norm(dx.as<float>(), dg.as<float>(), n_vec, n, 1e-6f, out_b.as<float>(), nullptr));
        REQUIRE(kc::round_act(out_b.as<float>(), n_vec * n, rb, nullptr));
        const auto fa = out_a.download<float>(x.size()), fb = out_b.download<float>(x.size());
        CHECK(std::memcmp(fa.data(), fb.data(), fa.size() * 4) == 0);
        rp.check_equal(n_vec * n);
      }
    }
  }
}

TEST_CASE("cuda add_rms_norm_round equals the residual add then rms_norm_round, bit for bit", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  DevBuf any(4096);
  const Target t = kTargets[2];
  for (const bool post : {true, false}) {
    for (const int64_t n : {256, 1000, 5376}) {  // 1000: not a multiple of 32 (the plain kernels, unrounded)
      for (const int64_t n_vec : {1, 4}) {
        INFO("post " << post << " n " << n << " n_vec " << n_vec);
        const bool rounds = n % 256 == 0;  // a q4_K row; 1000 is no row of any K type
        const auto w = matrix_view(any, t.type, t.layout, rounds ? n : 256);
        const size_t ws_bytes = rounds ? kc::workspace_bytes_for_gemv(w, int(n_vec)) : 0;
        DevBuf ws_a(ws_bytes), ws_b(ws_bytes);
        ws_a.poison(), ws_b.poison();
        const auto ra = ws_bytes ? kc::act_rounding(w, int(n_vec), {ws_a.as<void>(), ws_bytes}) : kc::ActRounding{};
        const auto rb = ws_bytes ? kc::act_rounding(w, int(n_vec), {ws_b.as<void>(), ws_bytes}) : kc::ActRounding{};
        const auto x = random_normal(size_t(n_vec * n), rng), h = random_normal(size_t(n_vec * n), rng, 4.0f);
        const auto pw = random_normal(size_t(n), rng), g = random_normal(size_t(n), rng);
        DevBuf xa = to_device(x), xb = to_device(x), ha = to_device(h), hb = to_device(h), dpw = to_device(pw),
               dg = to_device(g), out_b(h.size() * 4);
        // Fused, its output over the block output (as the forward pass calls it).
        REQUIRE(kc::add_rms_norm_round(xa.as<float>(), ha.as<float>(), post, dpw.as<float>(), dg.as<float>(), n_vec, n,
                                       1e-6f, ha.as<float>(), ra, nullptr));
        if (post) REQUIRE(kc::rms_norm_add(hb.as<float>(), dpw.as<float>(), n_vec, n, 1e-6f, xb.as<float>(), nullptr));
        else REQUIRE(kc::add(xb.as<float>(), hb.as<float>(), n_vec * n, nullptr));
        REQUIRE(kc::rms_norm_round(xb.as<float>(), dg.as<float>(), n_vec, n, 1e-6f, out_b.as<float>(), rb, nullptr));
        const auto got_x = xa.download<float>(x.size()), want_x = xb.download<float>(x.size());
        const auto got_o = ha.download<float>(h.size()), want_o = out_b.download<float>(h.size());
        CHECK(std::memcmp(got_x.data(), want_x.data(), got_x.size() * 4) == 0);
        CHECK(std::memcmp(got_o.data(), want_o.data(), got_o.size() * 4) == 0);
        if (ws_bytes) check_same(download(ra, n_vec * n), download(rb, n_vec * n));
      }
    }
  }
  DevBuf d(256 * 4);
  CHECK_FALSE(kc::add_rms_norm_round(d.as<float>(), d.as<float>(), false, nullptr, nullptr, 1, 256, 1e-6f, d.as<float>(),
                                     kc::ActRounding{}, nullptr));  // the output over the residual
}

TEST_CASE("cuda rms_norm_round: an all-zero row rounds to zero codes and scales", "[gpu]") {
  if (!have_gpu()) return;
  DevBuf any(4096);
  const int64_t n = 512;
  const auto w = matrix_view(any, GgmlType::Q4_K, kernels::WeightLayout::kGpu, n);
  const size_t ws_bytes = kc::workspace_bytes_for_gemv(w, 1);
  DevBuf ws(ws_bytes);
  ws.poison();
  const auto r = kc::act_rounding(w, 1, {ws.as<void>(), ws_bytes});
  const std::vector<float> zeros(size_t(n), 0.0f);
  DevBuf dx = to_device(zeros), out(size_t(n) * 4);
  REQUIRE(kc::rms_norm_round(dx.as<float>(), nullptr, 1, n, 1e-6f, out.as<float>(), r, nullptr));
  const auto got = download(r, n);
  for (const int8_t q : got.q) CHECK(q == 0);
  for (const float d : got.d) CHECK(d == 0.0f);
  for (const int s : got.s16) CHECK(s == 0);
}

TEST_CASE("cuda gated_act_round: silu/gelu floats and the GEMV quantiser's codes, bit for bit", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  DevBuf any(4096);
  for (const Target& t : kTargets) {
    for (const bool gelu : {false, true}) {
      // 21504: the 27B's FFN width; 288: nine blocks, so the last warp is partly past the end.
      for (const int64_t n_ff : {288, 21504}) {
        if (t.type == GgmlType::Q4_K && n_ff % 256 != 0) continue;  // no q4_K row of 288 elements
        for (const int64_t rows : {1, 5}) {
          INFO("type " << ggml_type_info(t.type).name << " chunk " << t.perm_chunk << " gelu " << gelu << " n_ff "
                       << n_ff << " rows " << rows);
          const RoundingPair rp(matrix_view(any, t.type, t.layout, n_ff), int(rows));
          const kc::ActRounding &ra = rp.a, &rb = rp.b;
          const int64_t n = rows * n_ff;
          const auto gate = random_normal(size_t(n), rng, 2.0f), up = random_normal(size_t(n), rng, 2.0f);
          DevBuf ga = to_device(gate), gb = to_device(gate), du = to_device(up);
          REQUIRE(kc::gated_act_round(gelu, ga.as<float>(), du.as<float>(), n, ra, nullptr));
          const Status plain = gelu ? kc::gelu_tanh_mul(gb.as<float>(), du.as<float>(), n, nullptr)
                                    : kc::silu_mul(gb.as<float>(), du.as<float>(), n, nullptr);
          REQUIRE(plain);
          REQUIRE(kc::round_act(gb.as<float>(), n, rb, nullptr));
          const auto fa = ga.download<float>(size_t(n)), fb = gb.download<float>(size_t(n));
          CHECK(std::memcmp(fa.data(), fb.data(), fa.size() * 4) == 0);
          rp.check_equal(n);
        }
      }
    }
  }
}

TEST_CASE("cuda act_round: no rounding where matmul would not round, and bad arguments", "[gpu]") {
  if (!have_gpu()) return;
  DevBuf any(4096), ws(1 << 20);
  const kc::Workspace w_ok{ws.as<void>(), ws.bytes()};
  const auto q4 = matrix_view(any, GgmlType::Q4_K, kernels::WeightLayout::kGpu, 256);
  CHECK(kc::act_rounding(q4, 1, {}).q == nullptr);                     // no workspace
  CHECK(kc::act_rounding(q4, kc::kMaxGemvCols + 1, w_ok).q == nullptr);  // the f16 GEMM's columns
  CHECK(kc::act_rounding(matrix_view(any, GgmlType::F16, kernels::WeightLayout::kGguf, 256), 1, w_ok).q == nullptr);
  const auto r = kc::act_rounding(q4, 1, w_ok);
  REQUIRE(r.q != nullptr);
  DevBuf x(256 * 4);
  CHECK_FALSE(kc::round_act(nullptr, 256, r, nullptr));
  CHECK_FALSE(kc::round_act(x.as<float>(), 100, r, nullptr));
  CHECK_FALSE(kc::round_act(x.as<float>(), 256, kc::ActRounding{}, nullptr));
  CHECK_FALSE(kc::rms_norm_round(nullptr, nullptr, 1, 256, 1e-6f, x.as<float>(), r, nullptr));
  CHECK_FALSE(kc::gated_act_round(false, nullptr, x.as<float>(), 256, r, nullptr));
  CHECK_FALSE(kc::gated_act_round(true, x.as<float>(), x.as<float>(), -32, r, nullptr));
}
