#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "core/units.h"
#include "offload/hardware_profile.h"

using namespace strata;
using namespace strata::offload;

namespace {

const char* kMinimal = R"(
name = "t"
[capacity]
vram_budget = { bytes = "12GiB", provenance = "datasheet", source = "x" }
pinned_budget = { bytes = "8GiB", provenance = "datasheet", source = "x" }
host_ram = { bytes = "16GiB", provenance = "measured", date = "2026-11-29", machine = "m" }
nvme_budget = { bytes = 1048576, provenance = "datasheet", source = "x" }
cuda_context = { bytes = "400MiB", provenance = "datasheet", source = "x" }
nvme_path = "/tmp"
[rates]
device_read = { gbps = 360, provenance = "datasheet", source = "x" }
gpu_gemm = { tflops = 50.5, provenance = "datasheet", source = "x" }
h2d_pinned = [ { chunk = "8MiB", gbps = 25, provenance = "datasheet", source = "x" },
               { chunk = "1MiB", gbps = 20, provenance = "datasheet", source = "x" } ]
nvme_read = [ { qd = 1, gbps = 1.5, provenance = "datasheet", source = "x" } ]
host_read = [ { threads = 1, gbps = 15, provenance = "datasheet", source = "x" } ]
cpu_gemv = [ { type = "q4_K", gbps = 16, provenance = "datasheet", source = "x" } ]
)";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

}  // namespace

TEST_CASE("profile: parse, derived rates, TOML round trip") {
  auto p = parse_profile(kMinimal, "t.toml");
  REQUIRE(p.is_ok());
  CHECK(p->vram_budget.bytes == 12 * kGiB);
  CHECK(p->nvme_budget.bytes == 1048576);
  CHECK(p->host_ram.prov.kind == Provenance::Kind::measured);
  CHECK(p->host_ram.prov.machine == "m");
  REQUIRE(p->h2d_pinned.size() == 2);
  CHECK(p->h2d_pinned[0].key == kMiB);  // sorted
  CHECK(p->h2d_gbps(512 * 1024) == 20);
  CHECK(p->h2d_gbps(64 * kMiB) == 25);
  CHECK(p->h2d_gbps(2 * kMiB) > 20);
  CHECK(p->h2d_gbps(2 * kMiB) < 25);
  CHECK(p->cpu_gemv_gbps(GgmlType::Q4_K) == 16);
  CHECK(p->cpu_gemv_gbps(GgmlType::Q6_K) == 16);  // unknown type: slowest listed
  const std::string text = profile_to_toml(*p);
  auto q = parse_profile(text, "roundtrip");
  REQUIRE(q.is_ok());
  CHECK(profile_to_toml(*q) == text);
  CHECK(q->gpu_gemm_tflops.value == 50.5);
  CHECK(q->host_ram.prov.date == "2026-11-29");
}

TEST_CASE("profile: errors name the key") {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    auto p = parse_profile(text, "bad.toml");
    REQUIRE_FALSE(p.is_ok());
    INFO(p.message());
    CHECK(p.message().find(needle) != std::string::npos);
  };
  expect_error(replace(kMinimal, "device_read = { gbps = 360, provenance = \"datasheet\", source = \"x\" }\n", ""),
               "rates.device_read: missing");
  expect_error(replace(kMinimal, "gbps = 360", "gbps = -3"), "rates.device_read.gbps: must be >= 0");
  expect_error(replace(kMinimal, "\"12GiB\"", "\"12 parsecs\""), "capacity.vram_budget.bytes");
  expect_error(replace(kMinimal, "type = \"q4_K\"", "type = \"q9_Z\""), "unknown GGML type");
  expect_error(replace(kMinimal, "provenance = \"measured\", date = \"2026-11-29\", ", "provenance = \"measured\", "),
               "needs 'date' and 'machine'");
  expect_error(replace(kMinimal, "\"16GiB\"", "\"4GiB\""), "exceeds capacity.host_ram");
  expect_error(replace(kMinimal, "name = \"t\"", "name = "), "TOML syntax");
}

TEST_CASE("profile: every shipped profile loads") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(STRATA_SOURCE_DIR) + "/configs/hw")) {
    if (e.path().extension() != ".toml") continue;
    auto p = load_profile(e.path().string());
    INFO(e.path().string() << ": " << (p ? "" : p.message()));
    REQUIRE(p.is_ok());
    CHECK(p->name == e.path().stem().string());
    ++n;
  }
  CHECK(n >= 8);
}
