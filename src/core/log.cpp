#include "core/log.h"

#include <atomic>
#include <cstdio>

namespace strata::log {
namespace {
std::atomic<Level> g_level{Level::info};
}

void set_level(Level l) { g_level.store(l, std::memory_order_relaxed); }
Level level() { return g_level.load(std::memory_order_relaxed); }

void write(Level l, const std::string& message) {
  static const char* kPrefix[] = {"debug: ", "", "warning: ", "error: ", ""};
  std::string line = fmt::format("strata: {}{}\n", kPrefix[int(l)], message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace strata::log
