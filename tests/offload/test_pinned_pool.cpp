// The pinned pool's budget (offload/pinned_pool.h): refusals that need no device. Allocations that
// succeed need a CUDA device (pinned memory); the GPU tests cover those (tests/gpu/test_streaming.cpp).
#include <catch2/catch.hpp>

#include "offload/pinned_pool.h"

using namespace strata;

TEST_CASE("The pinned pool refuses what its budget cannot hold, naming the use", "[cpu]") {
  offload::PinnedPool pool(1 << 20);
  auto a = pool.alloc(2 << 20, "block attn 3", false);
  REQUIRE_FALSE(a.is_ok());
  CHECK_THAT(a.message(), Catch::Contains("pinned-RAM budget 1.00 MiB exceeded") && Catch::Contains("block attn 3"));
  // A page-aligned request counts its slack: exactly the budget in bytes no longer fits.
  auto b = pool.alloc(1 << 20, "the disk tier", true);
  REQUIRE_FALSE(b.is_ok());
  CHECK_THAT(b.message(), Catch::Contains("the disk tier"));
  CHECK(pool.used_bytes() == 0);
  pool.release(nullptr);  // ignored
  CHECK(pool.used_bytes() == 0);
}

TEST_CASE("A bounce ring larger than the pinned budget is refused before any allocation", "[cpu]") {
  offload::PinnedPool pool(64 << 10);
  auto r = offload::BounceRing::create(pool, 2, 1 << 20, "loading weights");
  REQUIRE_FALSE(r.is_ok());
  CHECK_THAT(r.message(), Catch::Contains("loading weights (bounce buffer 1 of 2)"));
  CHECK(pool.used_bytes() == 0);
}
