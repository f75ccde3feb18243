// GPU smoke test: the CUDA runtime is usable and reports a sane device. Skips without a GPU.
#include <catch2/catch.hpp>

#include "kernels/cuda/device_info.h"

using namespace strata::kernels::cuda;

TEST_CASE("cuda devices are listed with sane properties", "[gpu]") {
  REQUIRE(compiled_with_cuda());
  std::string why;
  const auto devs = devices(&why);
  if (devs.empty()) {
    WARN("skipped: no CUDA device (" << why << ")");
    return;
  }
  for (const auto& d : devs) {
    INFO(d.name);
    CHECK(!d.name.empty());
    CHECK(d.cc_major >= 7);
    CHECK(d.total_bytes > (1ull << 30));
    CHECK(d.free_bytes <= d.total_bytes);
    CHECK(d.multiprocessors > 0);
  }
}
