#include "batch/batch_progress.h"

#include <cmath>
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

namespace strata::batch {

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const long t = std::lround(s);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

BatchProgress::BatchProgress(size_t total, size_t skipped, bool enabled)
    : total_(total), skipped_(skipped), enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

std::string BatchProgress::line() const {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const size_t finished = done_ + failed_;
  const double rate = secs > 0 ? double(tokens_) / secs : 0;
  // ETA from whole jobs: token counts vary per job, jobs per second is what the user waits on.
  const std::string eta = finished == 0 ? "?" : format_duration(secs / double(finished) * double(total_ - finished));
  std::string s = fmt::format("jobs {}/{}", finished, total_);
  if (failed_) s += fmt::format(" ({} failed)", failed_);
  if (skipped_) s += fmt::format(", {} already done", skipped_);
  s += fmt::format(" | {:.1f} tok/s | elapsed {} | eta {}", rate, format_duration(secs), eta);
  return s;
}

void BatchProgress::maybe_draw(bool force) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const auto interval = tty_ ? std::chrono::milliseconds(200) : std::chrono::seconds(10);
  if (!force && now - last_draw_ < interval) return;
  if (!tty_ && !force) return;  // piped: only on job boundaries
  last_draw_ = now;
  drawn_ = true;
  std::string l;
  if (tty_) {
    const size_t width = 24, filled = total_ ? (done_ + failed_) * width / total_ : width;
    l = fmt::format("\r\x1b[K[{}{}] {}", std::string(filled, '#'), std::string(width - filled, '.'), line());
  } else {
    l = fmt::format("batch: {}\n", line());
  }
  std::fwrite(l.data(), 1, l.size(), stderr);
  std::fflush(stderr);
}

void BatchProgress::tokens(uint64_t n) {
  tokens_ += n;
  maybe_draw(false);
}

void BatchProgress::job_done() {
  ++done_;
  const bool piped_due = std::chrono::steady_clock::now() - last_draw_ >= std::chrono::seconds(10);
  maybe_draw(tty_ || piped_due || done_ + failed_ == total_);
}

void BatchProgress::job_failed() {
  ++failed_;
  maybe_draw(true);
}

void BatchProgress::clear() {
  if (enabled_ && tty_ && drawn_ && !finished_) std::fputs("\r\x1b[K", stderr);
}

void BatchProgress::finish() {
  if (!enabled_ || finished_) return;
  if (tty_ && drawn_) std::fputs("\n", stderr);
  finished_ = true;
}

}  // namespace strata::batch
