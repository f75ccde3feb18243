// One launch for several matrices of one input (kernels/cuda/cuda_api.h gemv_group: Q and K, FFN
// gate and up) against each matrix's own GEMV reading the same rounding: the same floats, bit for
// bit, for every type it takes, 2 and 3 matrices of unequal heights (partial row groups included),
// both warp splits, programmatic dependent launch on and off, and groups large enough for the
// shared-memory (async) kernel. Outputs are poisoned first, so a row the group fails to write fails.
// Also: where it does not apply (mixed types, inputs or warp counts; i-quants), and its error.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "cuda_test_util.h"
#include "gpu_matrix_test_util.h"
#include "kernels/cuda/act_round.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/gemv_tuning.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::test;
namespace kc = strata::kernels::cuda;

}  // namespace

TEST_CASE("cuda gemv_group gives each matrix its own gemv's bits", "[gpu][gemv]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  struct Shape {
    int64_t n_in;
    std::vector<int64_t> n_out;
  };
  // 5376: the 27B's width (21 chunks: unequal per warp); 2816 x (4100, 4600): 1088 row groups, more
  // than two waves of 8-warp CTAs on an H100 or H200, so the group runs the shared-memory kernel
  // where each matrix alone runs the plain one (the same bits by design).
  const Shape shapes[] = {{5376, {1024, 100, 512}}, {768, {96, 20}}, {2816, {4100, 4600}}};
  const GgmlType types[] = {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0};
  for (const GgmlType t : types) {
    for (const Shape& sh : shapes) {
      std::vector<GpuMatrix> mats;
      for (const int64_t rows : sh.n_out) mats.emplace_back(t, sh.n_in, rows, rng);
      std::vector<const kernels::WeightView*> views;
      for (const GpuMatrix& m : mats) views.push_back(&m.view);
      const int count = int(views.size());
      const size_t ws_bytes = kc::workspace_bytes_for_gemv(*views[0], 1);
      for (const int warps : {8, 16}) {
        kc::set_gemv_warps(warps);
        for (const bool pdl : {false, true}) {
          kc::set_gemv_pdl(pdl);
          INFO("type " << ggml_type_info(t).name << " n_in " << sh.n_in << " matrices " << count << " warps " << warps
                       << " pdl " << pdl);
          DevBuf ws(ws_bytes);
          ws.poison();
          const kc::Workspace w{ws.as<void>(), ws_bytes};
          REQUIRE(kc::gemv_group_applies(views.data(), count, w));
          const auto x = random_normal(size_t(sh.n_in), rng, 2.0f);
          DevBuf dx = to_device(x);
          REQUIRE(kc::round_act(dx.as<float>(), sh.n_in, kc::act_rounding(*views[0], 1, w), nullptr));
          std::vector<DevBuf> alone, grouped;
          std::vector<float*> ys;
          for (int i = 0; i < count; ++i) {
            alone.emplace_back(size_t(sh.n_out[size_t(i)]) * 4), grouped.emplace_back(size_t(sh.n_out[size_t(i)]) * 4);
            alone.back().poison(), grouped.back().poison();
            ys.push_back(grouped.back().as<float>());
          }
          for (int i = 0; i < count; ++i)
            REQUIRE(kc::matmul(*views[size_t(i)], dx.as<float>(), 1, alone[size_t(i)].as<float>(), w, nullptr, true));
          REQUIRE(kc::gemv_group(views.data(), ys.data(), count, w, nullptr));
          for (int i = 0; i < count; ++i) {
            INFO("matrix " << i);
            const auto want = alone[size_t(i)].download<float>(size_t(sh.n_out[size_t(i)]));
            const auto got = grouped[size_t(i)].download<float>(size_t(sh.n_out[size_t(i)]));
            CHECK(differing(got.data(), want.data(), got.size(), 4) == 0);
          }
        }
      }
      kc::set_gemv_warps(0);
      kc::set_gemv_pdl(false);
    }
  }
}

TEST_CASE("cuda gemv_group applies only to matrices that can share a launch", "[gpu][gemv]") {
  if (!have_gpu()) return;
  Rng rng(fresh_seed());
  const GpuMatrix a(GgmlType::Q3_K, 2816, 64, rng), b(GgmlType::Q4_K, 2816, 64, rng), c(GgmlType::Q3_K, 5376, 64, rng),
      d(GgmlType::Q3_K, 2816, 96, rng), iq(GgmlType::IQ4_XS, 2816, 64, rng);
  const size_t ws_bytes = kc::workspace_bytes_for_gemv(c.view, 1);
  DevBuf ws(ws_bytes);
  const kc::Workspace w{ws.as<void>(), ws_bytes};
  const kernels::WeightView* same[] = {&a.view, &d.view};
  const kernels::WeightView* types[] = {&a.view, &b.view};
  const kernels::WeightView* inputs[] = {&a.view, &c.view};
  const kernels::WeightView* iqs[] = {&iq.view, &iq.view};
  const kernels::WeightView* four[] = {&a.view, &d.view, &a.view, &d.view};
  CHECK(kc::gemv_group_applies(same, 2, w));
  CHECK_FALSE(kc::gemv_group_applies(types, 2, w));
  CHECK_FALSE(kc::gemv_group_applies(inputs, 2, w));
  CHECK_FALSE(kc::gemv_group_applies(iqs, 2, w));
  CHECK_FALSE(kc::gemv_group_applies(four, 4, w));
  CHECK_FALSE(kc::gemv_group_applies(same, 2, kc::Workspace{}));  // no room for the rounding
  DevBuf y0(96 * 4), y1(96 * 4);
  float* ys[] = {y0.as<float>(), y1.as<float>()};
  const Status s = kc::gemv_group(types, ys, 2, w, nullptr);
  REQUIRE_FALSE(s);
  CHECK(s.message().find("cannot share a launch") != std::string::npos);
}
