#include "core/progress.h"

#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

#include "core/units.h"

namespace strata {

Progress::Progress(std::string label, uint64_t total, std::string unit, bool enabled)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::add(uint64_t done) {
  done_.fetch_add(done, std::memory_order_relaxed);
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const auto interval = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000);
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || now - last_draw_ < interval) return;
  last_draw_ = now;
  draw(false);
}

void Progress::finish() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (enabled_) draw(true);
}

void Progress::draw(bool final) {
  const uint64_t done = done_.load(std::memory_order_relaxed);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double frac = total_ ? double(done) / double(total_) : 1.0;
  std::string amount, rate;
  if (unit_ == "B") {
    amount = fmt::format("{} / {}", format_bytes(done), format_bytes(total_));
    rate = secs > 0 ? fmt::format("{}/s", format_bytes(uint64_t(double(done) / secs))) : "";
  } else {
    amount = fmt::format("{} / {} {}", done, total_, unit_);
    rate = secs > 0 ? fmt::format("{:.1f} {}/s", double(done) / secs, unit_) : "";
  }
  const double eta = frac > 0 && !final ? secs * (1 - frac) / frac : 0;
  std::string line;
  if (tty_) {
    const int width = 30, filled = int(frac * width);
    line = fmt::format("\r{} [{}{}] {:5.1f}% {} {} {}", label_, std::string(filled, '#'),
                       std::string(width - filled, '.'), 100 * frac, amount, rate,
                       final ? fmt::format("in {:.1f}s\n", secs) : fmt::format("eta {:.0f}s  ", eta));
  } else {
    line = fmt::format("{}: {:5.1f}% {} {} {}\n", label_, 100 * frac, amount, rate,
                       final ? fmt::format("done in {:.1f}s", secs) : fmt::format("eta {:.0f}s", eta));
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace strata
