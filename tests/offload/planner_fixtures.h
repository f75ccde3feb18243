// Fixtures the planner tests share: a header-only 27B (gemma3-27b shapes, q3_K_M mix, written once
// per test process) and the shipped hardware profiles.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "model/synth.h"
#include "offload/hardware_profile.h"
#include "test_util.h"

namespace strata::offload::test_fixtures {

inline std::string header_27b() {
  static std::string path;
  if (path.empty()) {
    model::SynthOptions o;
    o.arch = model::Arch::gemma3;
    o.preset = "27b";
    o.mix = "q3_k_m";
    o.header_only = true;
    o.progress = false;
    REQUIRE(model::apply_preset(o).is_ok());
    path = (test::temp_dir("offload") / "g27.gguf").string();
    REQUIRE(model::write_synthetic_model(o, path).is_ok());
  }
  return path;
}

inline HardwareProfile profile(const std::string& name) {
  auto p = load_profile(std::string(STRATA_SOURCE_DIR) + "/configs/hw/" + name + ".toml");
  REQUIRE(p.is_ok());
  return *p;
}

}  // namespace strata::offload::test_fixtures
