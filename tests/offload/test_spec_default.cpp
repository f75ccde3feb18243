// The default speculation (offload/spec_default.h) and the measured column cost it rests on.
#include <catch2/catch.hpp>

#include <string>

#include "core/units.h"
#include "offload/cost_model.h"
#include "offload/model_blocks.h"
#include "offload/planner.h"
#include "offload/planner_fixtures.h"
#include "offload/spec_default.h"

using namespace strata;
using namespace strata::offload;
using namespace strata::offload::test_fixtures;

TEST_CASE("cost model: a b-column GEMV costs the measured multiple of one column", "[planner]") {
  CHECK(gemv_column_cost(1) == Approx(1.0));
  CHECK(gemv_column_cost(0) == Approx(1.0));  // no columns prices as one (a call still runs)
  CHECK(gemv_column_cost(2) == Approx(1.14));
  CHECK(gemv_column_cost(8) == Approx(1.39));
  CHECK(gemv_column_cost(16) == Approx(2.16));
  CHECK(gemv_column_cost(64) == Approx(8.10));
  CHECK(gemv_column_cost(6) == Approx(1.30 + (1.39 - 1.30) * 2 / 4));  // linear between points
  CHECK(gemv_column_cost(128) == Approx(16.2));                        // past 64: more MMA passes
  for (uint32_t b = 1; b < 200; ++b) CHECK(gemv_column_cost(b + 1) > gemv_column_cost(b));
}

TEST_CASE("default speculation: auto where a verify pass is cheap, none on the CPU engine's exact kernels",
          "[planner]") {
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  RunShape r;
  r.ctx = 4096;
  r.prompt = 512;
  r.gen = 256;
  const uint32_t n = m->n_layer;
  const Placement resident = Placement::uniform(n, Tier::gpu, KvTier::gpu);

  SECTION("resident on a GPU: the GEMV reads each weight once for all rows") {
    const SpecDefault d = default_speculation(*m, profile("h200"), resident, r, 8);
    CHECK(d.on);
    CHECK(d.verify2_over_plain > 1.0);
    CHECK(d.verify2_over_plain < 1.2);
    CHECK(d.gain >= kDefaultSpecMinGain);
    CHECK(d.k >= 1);
    CHECK(d.k <= 8);
    CHECK(d.reason.rfind("auto (the default", 0) == 0);
  }
  SECTION("streamed under a 12 GiB budget: the copies bound both passes") {
    for (const char* name : {"h200", "rtx3060-12g"}) {
      INFO(name);
      const HardwareProfile p = profile(name);
      Budgets b = Budgets::of(p);
      b.vram = 12 * kGiB;
      auto plan = offload::plan(*m, p, b, r);
      REQUIRE(plan.is_ok());
      REQUIRE(plan->placement.any_streamed());
      const SpecDefault d = default_speculation(*m, p, plan->placement, r, 8);
      CHECK(d.on);
      // On the H200 PCIe sets the step (a second row adds ~1%); the 3060's step is its GEMV.
      CHECK(d.verify2_over_plain < (std::string(name) == "h200" ? 1.03 : 1.2));
    }
  }
  SECTION("the CPU engine: exact row dots cost each row again") {
    const SpecDefault d = default_speculation_cpu(*m, profile("h200"), false, 8);
    CHECK_FALSE(d.on);
    CHECK(d.verify2_over_plain == Approx(2.0));
    CHECK(d.gain == 1.0);  // plain decoding is the best option
    CHECK(d.k == 0);
    CHECK(d.reason.rfind("none (the default", 0) == 0);
  }
  SECTION("the CPU engine's int8 kernels read the weights once for several rows where measured") {
    const HardwareProfile p = profile("rtx3060-12g");  // cpu_gemv_q8 rates at 1 and 8 columns
    REQUIRE(p.cpu_gemv_q8_gbps(GgmlType::Q3_K, 8) > 0);
    const SpecDefault exact = default_speculation_cpu(*m, p, false, 8);
    const SpecDefault int8 = default_speculation_cpu(*m, p, true, 8);
    CHECK(int8.verify2_over_plain < exact.verify2_over_plain);
    CHECK(int8.verify2_over_plain > 1.0);
    CHECK(int8.gain > exact.gain);
  }
  SECTION("a draft length of 1 is tried, and the shape's own draft fields do not matter") {
    RunShape spec = r;
    spec.draft_depth = 16;
    spec.draft_len = 4;
    const SpecDefault a = default_speculation(*m, profile("h200"), resident, r, 1);
    const SpecDefault b = default_speculation(*m, profile("h200"), resident, spec, 1);
    CHECK(a.k == 1);
    CHECK(a.gain == b.gain);
    CHECK(a.on == b.on);
  }
}
