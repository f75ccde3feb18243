// Small helpers shared by tests: paths to test data, temp dirs, random vectors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/rng.h"

namespace strata::test {

// tests/data/reference/<rel> (or $STRATA_TESTDATA/<rel>)
std::string testdata(const std::string& rel);
// The bytes of tests/fuzz/regressions/<target>/<name>: an input a fuzz target once crashed on.
std::string fuzz_regression(const std::string& target, const std::string& name);
// A fresh empty directory under <build>/test-scratch (left for inspection; the build dir is scratch).
std::filesystem::path temp_dir(const std::string& tag);
// Fresh (non-repeating across calls) seed: tests use new random inputs each run, and print the
// seed on failure via INFO.
uint64_t fresh_seed();
std::vector<float> random_normal(size_t n, Rng& rng, float scale = 1.0f);

}  // namespace strata::test
