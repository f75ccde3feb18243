// Byte counts and rates and their text forms, in one place: "12GiB", "512 MiB", "1.5GB", "4096",
// "40.5 GFLOP/s".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace strata {

inline constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

// Parses a size with optional unit (B, KiB, MiB, GiB, TiB binary; KB, MB, GB, TB decimal;
// K/M/G/T mean binary, as llama.cpp users expect). Case-insensitive units, optional space.
Result<uint64_t> parse_bytes(std::string_view text);

// "1.23 GiB", "512 B": human-readable, binary units.
std::string format_bytes(uint64_t bytes);

// "40.5 GFLOP/s", "151 TFLOP/s": a compute rate with the unit that keeps 3 significant digits.
std::string format_flops(double flops_per_s);

// "950", "31.23 M", "27.01 B": a count (parameters, tokens) with the decimal unit (K, M, B, T)
// that keeps it at 4 significant digits.
std::string format_count(uint64_t n);

}  // namespace strata
