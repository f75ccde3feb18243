#include "spec/draft_window_config.h"

#include <charconv>

#include <fmt/format.h>

#include "runtime/engine.h"

namespace strata::spec {

runtime::DraftWindow DraftWindowConfig::at(uint32_t last_pos) const {
  if (mode == Mode::off) return {};
  if (mode == Mode::automatic && uint64_t(last_pos) + 1 < kAutoFromContext) return {};
  return window.cuts(last_pos) ? window : runtime::DraftWindow{};
}

std::string DraftWindowConfig::text() const {
  switch (mode) {
    case Mode::off: return "off";
    case Mode::automatic: return "auto";
    case Mode::fixed: return fmt::format("{},{}", window.sinks, window.recent);
  }
  return "?";
}

Result<DraftWindowConfig> parse_draft_window(std::string_view text) {
  DraftWindowConfig c;
  if (text == "auto") return c;
  if (text == "off") {
    c.mode = DraftWindowConfig::Mode::off;
    c.window = {};
    return c;
  }
  auto number = [](std::string_view s, uint32_t& v) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && ec == std::errc() && p == s.data() + s.size();
  };
  const size_t comma = text.find(',');
  uint32_t sinks = 0, recent = 0;
  if (comma == text.npos || !number(text.substr(0, comma), sinks) || !number(text.substr(comma + 1), recent))
    return Status::error("--draft-window '{}': expected SINKS,RECENT (e.g. 64,4096), auto or off", text);
  // A draft pass's rows must all see their tree ancestors through the window (engine.h).
  if (recent < runtime::kMaxExactRows)
    return Status::error("--draft-window {}: RECENT must be at least {}", text, runtime::kMaxExactRows);
  c.mode = DraftWindowConfig::Mode::fixed;
  c.window = {sinks, recent};
  return c;
}

}  // namespace strata::spec
