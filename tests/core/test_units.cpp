#include <catch2/catch.hpp>

#include "core/units.h"

using namespace strata;

TEST_CASE("sizes parse with binary and decimal units", "[core][units]") {
  CHECK(*parse_bytes("4096") == 4096);
  CHECK(*parse_bytes("12GiB") == 12ull << 30);
  CHECK(*parse_bytes("12 GiB") == 12ull << 30);
  CHECK(*parse_bytes("12g") == 12ull << 30);
  CHECK(*parse_bytes("1.5GB") == 1500000000ull);
  CHECK(*parse_bytes("512MiB") == 512ull << 20);
  CHECK(*parse_bytes("2T") == 2ull << 40);
  CHECK(*parse_bytes("0") == 0);
}

TEST_CASE("bad sizes are rejected with the reason", "[core][units]") {
  CHECK(parse_bytes("").message() == "empty size");
  CHECK(parse_bytes("GiB").message().find("does not start with a number") != std::string::npos);
  CHECK(parse_bytes("12 parsecs").message().find("unknown unit 'parsecs'") != std::string::npos);
  CHECK(parse_bytes("1e30").message().find("unknown unit") != std::string::npos);
  CHECK(parse_bytes("99999999999TiB").message().find("too large") != std::string::npos);
  CHECK_FALSE(parse_bytes("1..2G").is_ok());
}

TEST_CASE("sizes format in binary units, rates in decimal ones", "[core][units]") {
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(12ull << 30) == "12.00 GiB");
  CHECK(format_flops(40.5e9) == "40.5 GFLOP/s");
  CHECK(format_flops(151.2e12) == "151 TFLOP/s");
  CHECK(format_flops(2.5e12) == "2.50 TFLOP/s");
  CHECK(format_flops(999.6e9) == "1.00 TFLOP/s");
  CHECK(format_flops(0) == "0.00 FLOP/s");
}

TEST_CASE("counts format with the decimal unit that fits", "[core][units]") {
  CHECK(format_count(0) == "0");
  CHECK(format_count(950) == "950");
  CHECK(format_count(1000) == "1.000 K");
  CHECK(format_count(31'234'567) == "31.23 M");
  CHECK(format_count(999'999) == "1.000 M");  // rounds up into the next unit, not "1000.0 K"
  CHECK(format_count(27'009'000'000ull) == "27.01 B");
  CHECK(format_count(350'000'000ull) == "350.0 M");
}
