#include "core/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace strata {

Result<uint64_t> parse_bytes(std::string_view text) {
  std::string s(text);
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }), s.end());
  if (s.empty()) return Status::error("empty size");
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return Status::error("size '{}' does not start with a number", text);
  double number = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + i, number);
  if (ec != std::errc() || ptr != s.data() + i) return Status::error("bad number in size '{}'", text);
  std::string unit = s.substr(i);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  static const struct { const char* name; double mult; } kUnits[] = {
      {"", 1}, {"b", 1},
      {"k", 1024.0}, {"kib", 1024.0}, {"kb", 1e3},
      {"m", 1048576.0}, {"mib", 1048576.0}, {"mb", 1e6},
      {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},
      {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12},
  };
  for (const auto& u : kUnits) {
    if (unit == u.name) {
      const double bytes = number * u.mult;
      // Below 2^63: llround returns a long long (past it the result is unspecified), and sizes
      // travel as TOML/JSON integers, which are signed 64-bit.
      if (!(bytes < 9.2e18)) return Status::error("size '{}' is too large", text);
      return uint64_t(std::llround(bytes));
    }
  }
  return Status::error("unknown unit '{}' in size '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
                       s.substr(i), text);
}

std::string format_bytes(uint64_t bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) { v /= 1024.0; ++u; }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, kNames[u]);
}

std::string format_count(uint64_t n) {
  static const char* kNames[] = {"", "K", "M", "B", "T"};
  double v = double(n);
  int u = 0;
  while (v >= 999.95 && u < 4) { v /= 1000.0; ++u; }
  if (u == 0) return fmt::format("{}", n);
  const int decimals = v >= 99.995 ? 1 : v >= 9.9995 ? 2 : 3;  // 4 significant digits
  return fmt::format("{:.{}f} {}", v, decimals, kNames[u]);
}

std::string format_flops(double flops_per_s) {
  static const char* kNames[] = {"FLOP/s", "KFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s"};
  double v = flops_per_s;
  int u = 0;
  while (v >= 1000.0 && u < 5) { v /= 1000.0; ++u; }
  if (v >= 999.5 && u < 5) { v /= 1000.0; ++u; }  // would print as "1000"
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : v < 100 ? 1 : 0, kNames[u]);
}

}  // namespace strata
