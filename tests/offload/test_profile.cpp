#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "core/units.h"
#include "offload/default_profile.h"
#include "offload/hardware_profile.h"
#include "offload/probe.h"
#include "test_util.h"

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

TEST_CASE("profile: text toml++ would meet with undefined behaviour is rejected (fuzz regressions)") {
  auto message = [](const std::string& text) {
    auto p = parse_profile(text, "bad.toml");
    return p ? std::string("(parsed)") : p.message();
  };
  auto has = [](const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; };
  using strata::test::fuzz_regression;
  // U+FCFF before a comment: toml++'s whitespace table reached __builtin_unreachable.
  CHECK(has(message(fuzz_regression("profile", "non-ascii-outside-string.toml")),
            "bad.toml:1:1: non-ASCII character outside a string or comment"));
  CHECK(has(message(fuzz_regression("profile", "control-in-table-header.toml")), "bad.toml:1:2: control character 0x08"));
  // A quote right after a value ('4"') opens no string for toml++: the U+FEFD after it was
  // classified as whitespace (UB) while the scanner thought it inside a string.
  CHECK(has(message(fuzz_regression("profile", "non-ascii-after-bad-value.toml")),
            "bad.toml:1:10: non-ASCII character outside a string or comment"));
  // "[" then a line break broke parse_key()'s assumed precondition: now toml++'s own error.
  CHECK(has(message(fuzz_regression("profile", "table-header-line-break.toml")), "bad.toml:1:"));
  const std::string key = message(replace(kMinimal, "[rates]", "[rates]\n\xC2\xA1 = 1"));
  INFO(key);
  CHECK(has(key, "bad.toml:11:1: non-ASCII"));  // line 11 of kMinimal (its first line is empty)
  // Two inputs from the long run on the GPU machine's cores: a quote after '[' inside a bad value
  // (toml++ scans the bad value on; the old scanner thought the U+FEF9 after it was in a string),
  // and a backslash before a non-ASCII byte in a basic string. Now nothing non-ASCII reaches
  // toml++: both fail with a message, whatever the scanner makes of them.
  CHECK(has(message(fuzz_regression("profile", "non-ascii-in-bad-value-after-bracket.toml")), "bad.toml:"));
  CHECK(has(message(fuzz_regression("profile", "backslash-before-non-ascii.toml")), "bad.toml:"));
  CHECK(has(message(replace(kMinimal, "name = \"t\"", "name = \"t\\\xC3\xA9\"")), "invalid escape sequence"));
  CHECK(has(message(replace(kMinimal, "name = \"t\"", "name = 't\xC3\xA9'")), "non-ASCII character in a literal string"));
  CHECK(has(message(replace(kMinimal, "name = \"t\"", "name = \"t\xC3\"")), "malformed UTF-8"));
  // Non-ASCII stays fine inside basic strings (single- and multi-line; 1- to 4-byte UTF-8) and comments.
  const std::string ok =
      replace(replace(kMinimal, "name = \"t\"",
                      "name = \"t\"\ndescription = \"\"\"caf\xC3\xA9 \xE3\x80\x81 \xF0\x9F\x98\x80\"\"\"  # \xC2\xA1"),
              "source = \"x\" }\npinned", "source = \"\\\"\xC2\xA1\" }\npinned");
  auto p = parse_profile(ok, "ok.toml");
  INFO((p ? "" : p.message()));
  REQUIRE(p.is_ok());
  CHECK(p->description == "caf\xC3\xA9 \xE3\x80\x81 \xF0\x9F\x98\x80");
  CHECK(p->vram_budget.prov.source == "\"\xC2\xA1");
}

TEST_CASE("profile: counts beyond range are errors and odd strings round-trip (fuzz regressions)") {
  // A queue depth of 1e30 was converted to uint64: undefined behaviour.
  auto p = parse_profile(replace(kMinimal, "qd = 1,", "qd = 1e30,"), "bad.toml");
  REQUIRE_FALSE(p.is_ok());
  CHECK(p.message().find("rates.nvme_read[0].qd: 1e+30 is beyond") != std::string::npos);
  // Sizes stay below 2^63 (llround's range; TOML integers are signed 64-bit).
  auto big = parse_profile(replace(kMinimal, "\"16GiB\"", "\"10000000000000000000\""), "bad.toml");
  REQUIRE_FALSE(big.is_ok());
  CHECK(big.message().find("too large") != std::string::npos);
  // Quotes, backslashes and control characters in names and provenance strings are escaped on save.
  auto q = parse_profile(replace(replace(kMinimal, "name = \"t\"", "name = \"a\\\"b\\nc\\u0001\""),
                                 "machine = \"m\"", "machine = \"m\\\"\\\\\""),
                         "odd.toml");
  INFO((q ? "" : q.message()));
  REQUIRE(q.is_ok());
  CHECK(q->name == "a\"b\nc\x01");
  const std::string text = profile_to_toml(*q);
  auto r = parse_profile(text, "roundtrip");
  INFO(text);
  REQUIRE(r.is_ok());
  CHECK(r->name == q->name);
  CHECK(r->host_ram.prov.machine == "m\"\\");
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

// What strata probe measures of the int8-activation GEMV (measure_cpu_gemv_q8, small here) goes
// into rates.cpu_gemv_q8, survives the TOML round trip, and answers cpu_gemv_q8_gbps; a profile
// without the key (every profile written before) loads with none.
TEST_CASE("profile: int8 GEMV rates from the probe, written and read back") {
  auto p = parse_profile(kMinimal, "t.toml");
  REQUIRE(p.is_ok());
  CHECK(p->cpu_gemv_q8.empty());
  CHECK(p->cpu_gemv_q8_gbps(GgmlType::Q4_K, 1) == 0);
  CHECK(profile_to_toml(*p).find("cpu_gemv_q8") == std::string::npos);

  const auto prov = Provenance::measured_on("2026-12-02", "test-host");
  const auto rates = measure_cpu_gemv_q8({GgmlType::Q4_K, GgmlType::IQ3_XXS, GgmlType::F16}, {1, 2}, {1, 8},
                                         2 * kMiB, 1, prov);
  REQUIRE(rates.size() == 8);  // f16 has no int8 kernel: skipped
  for (const auto& r : rates) {
    CHECK((r.type == GgmlType::Q4_K || r.type == GgmlType::IQ3_XXS));
    CHECK(r.gbps > 0);
    CHECK(r.prov.machine == "test-host");
  }
  p->cpu_gemv_q8 = rates;
  const std::string text = profile_to_toml(*p);
  auto q = parse_profile(text, "roundtrip");
  REQUIRE(q.is_ok());
  REQUIRE(q->cpu_gemv_q8.size() == rates.size());
  for (size_t i = 0; i < rates.size(); ++i) {
    CHECK(q->cpu_gemv_q8[i].type == rates[i].type);
    CHECK(q->cpu_gemv_q8[i].threads == rates[i].threads);
    CHECK(q->cpu_gemv_q8[i].cols == rates[i].cols);
    CHECK(q->cpu_gemv_q8[i].gbps == Approx(rates[i].gbps).epsilon(1e-12));
    CHECK(q->cpu_gemv_q8[i].prov.date == "2026-12-02");
  }
  CHECK(profile_to_toml(*q) == text);
  CHECK(q->cpu_gemv_q8_gbps(GgmlType::Q4_K, 1) > 0);
  CHECK(q->cpu_gemv_q8_gbps(GgmlType::Q6_K, 1) == 0);  // not measured: no int8 rate

  // A malformed entry names its key.
  const std::string broken = replace(text, "threads = 1, cols = 1", "threads = 0, cols = 1");
  auto e = parse_profile(broken, "bad.toml");
  REQUIRE_FALSE(e.is_ok());
  CHECK(e.message().find("rates.cpu_gemv_q8[0]") != std::string::npos);
}

TEST_CASE("profile: int8 GEMV rate by columns: most threads, time linear in columns") {
  auto p = parse_profile(kMinimal, "t.toml");
  REQUIRE(p.is_ok());
  const auto ds = Provenance::datasheet("x");
  // 2 threads: 1 column at 20 GB/s (0.05 s per GB), 8 columns at 10 GB/s (0.1 s per GB). 1 thread
  // is slower and must be ignored.
  p->cpu_gemv_q8 = {{GgmlType::Q4_K, 1, 1, 5, ds}, {GgmlType::Q4_K, 2, 8, 10, ds}, {GgmlType::Q4_K, 2, 1, 20, ds}};
  CHECK(p->cpu_gemv_q8_gbps(GgmlType::Q4_K, 1) == Approx(20));
  CHECK(p->cpu_gemv_q8_gbps(GgmlType::Q4_K, 8) == Approx(10));
  CHECK(1 / p->cpu_gemv_q8_gbps(GgmlType::Q4_K, 4) == Approx(0.05 + 0.05 * 3 / 7));
  CHECK(1 / p->cpu_gemv_q8_gbps(GgmlType::Q4_K, 15) == Approx(0.05 + 0.05 * 14 / 7));  // extrapolated
  // One column count only: proportional.
  p->cpu_gemv_q8 = {{GgmlType::Q8_0, 4, 1, 30, ds}};
  CHECK(p->cpu_gemv_q8_gbps(GgmlType::Q8_0, 3) == Approx(10));
}

// detected_profile's quick CPU check (offload/default_profile.h): every listed type at 1 and 8
// columns on every hardware thread, capped at the host read, measured once per process.
TEST_CASE("profile: the detected profile's quick CPU check") {
  const auto t0 = std::chrono::steady_clock::now();
  const QuickCpuRates& q = quick_cpu_check();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("quick CPU check: %.3f s\n", s);  // the start-up cost; timings are not asserted
  const uint32_t hw = std::max(1u, std::thread::hardware_concurrency());
  REQUIRE(q.host_read.size() == 1);
  const double read = q.host_read[0].gbps;
  CHECK(q.host_read[0].key == hw);
  CHECK(read > 0);
  CHECK(q.host_read[0].prov.kind == Provenance::Kind::measured);
  const GgmlType types[] = {GgmlType::Q3_K, GgmlType::Q4_K,   GgmlType::Q5_K,    GgmlType::Q6_K,
                            GgmlType::Q8_0, GgmlType::IQ4_XS, GgmlType::IQ3_XXS, GgmlType::IQ3_S};
  REQUIRE(q.gemv_q8.size() == 2 * std::size(types));
  for (GgmlType t : types) {
    for (uint32_t cols : {1u, 8u}) {
      INFO(ggml_type_info(t).name << ", " << cols << " columns");
      const auto it = std::find_if(q.gemv_q8.begin(), q.gemv_q8.end(),
                                   [&](const GemvQ8Rate& g) { return g.type == t && g.cols == cols; });
      REQUIRE(it != q.gemv_q8.end());
      CHECK(it->threads == hw);
      CHECK(it->gbps > 0);
      CHECK(it->gbps <= read);
      CHECK(it->prov.kind == Provenance::Kind::measured);
      CHECK(it->prov.date == "now");
    }
  }
  CHECK(&quick_cpu_check() == &q);  // once per process
  // A profile carrying them is valid and prices the int8 GEMV with them.
  HardwareProfile p = detected_profile(false, true);
  CHECK(p.cpu_gemv_q8.empty());  // no GPU in use: no cpu tier to decide, nothing measured
  p.cpu_gemv_q8 = q.gemv_q8;
  p.host_read = q.host_read;
  CHECK(validate_profile(p).is_ok());
  CHECK(p.cpu_gemv_q8_gbps(GgmlType::Q4_K, 1) > 0);
}
