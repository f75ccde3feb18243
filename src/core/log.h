// Diagnostics to stderr, so stdout stays clean for results (generated text, JSON, ids).
// Thread-safe: each message is written with one fwrite.
#pragma once

#include <string>

#include <fmt/format.h>

namespace strata::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3, quiet = 4 };

void set_level(Level level);
Level level();
void write(Level level, const std::string& message);

template <typename... A> void debug(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::debug) write(Level::debug, fmt::format(f, std::forward<A>(a)...));
}
template <typename... A> void info(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::info) write(Level::info, fmt::format(f, std::forward<A>(a)...));
}
template <typename... A> void warn(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::warn) write(Level::warn, fmt::format(f, std::forward<A>(a)...));
}
template <typename... A> void error(fmt::format_string<A...> f, A&&... a) {
  write(Level::error, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace strata::log
