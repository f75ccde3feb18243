// Progress of long work on stderr: a redrawn bar on a terminal, a plain line every few seconds
// when stderr is piped (logs stay readable). Thread-safe: add() may be called from any worker.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace strata {

class Progress {
 public:
  // `total` in `unit`s ("B" shows bytes as MiB/GiB with a rate; anything else is a plain count).
  Progress(std::string label, uint64_t total, std::string unit = "B", bool enabled = true);
  ~Progress();  // finishes the line
  void add(uint64_t done);
  void finish();

 private:
  void draw(bool final);

  std::string label_, unit_;
  uint64_t total_;
  bool enabled_, tty_;
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool finished_ = false;
};

}  // namespace strata
