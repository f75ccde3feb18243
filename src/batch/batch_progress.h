// Progress of a batch run on stderr: jobs done / total, generated tokens per second and an ETA.
// On a terminal one line redrawn in place (at most 5 times a second); when stderr is piped (Slurm,
// kubectl logs) a plain line per finished job, at most one every 10 s, plus the final one — so logs
// stay readable. Not thread-safe: the runner calls it from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace strata::batch {

class BatchProgress {
 public:
  // total: jobs this run has to do (already-done ones excluded); skipped: jobs found done.
  BatchProgress(size_t total, size_t skipped, bool enabled);
  void tokens(uint64_t n);  // generated tokens (prompt tokens are not counted in the rate)
  void job_done();
  void job_failed();
  void finish();
  // Erases the redrawn line on a terminal so a message printed next starts at column 0 (the
  // next draw puts the line back).
  void clear();
  // The line as it would be printed now (for tests and the final summary).
  std::string line() const;

 private:
  void maybe_draw(bool force);
  size_t total_, skipped_, done_ = 0, failed_ = 0;
  uint64_t tokens_ = 0;
  bool enabled_, tty_, finished_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

}  // namespace strata::batch
