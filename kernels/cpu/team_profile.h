// Where the thread team's time goes (STRATA_TEAM_PROFILE=1): per team job, the caller's serial gap
// before it, the hand-over (publish to a worker's first part), the parts' busy time, the tail (last
// part done to the caller seeing it), printed to stderr at exit, grouped by (call site, parts).
//
// Why: a decode step of a small model is ~60 team jobs of a few microseconds each, and on 16
// cores what bounds it is the hand-overs and the serial work between jobs, which no per-op trace
// span shows (a span is tens of times the cost being measured). The figures come from the engine
// itself on the machine that matters, with one environment variable.
//
// Costs two clock reads per part and a mutex per job when on; one predictable branch when off.
// Thread-safety: the per-thread records (PartClock) are written by the thread running the part and
// read by the caller after the job's done count (acquire) says the part returned.
#pragma once

#include <atomic>
#include <cstdint>

namespace strata::kernels::cpu::team_profile {

bool enabled();  // STRATA_TEAM_PROFILE set and not "0"; read once
int64_t now_ns();  // steady clock

// The call site of the next team jobs the calling thread starts (a string literal), for grouping.
// Scoped: restores the previous label.
struct Label {
  explicit Label(const char* name);
  ~Label();
  const char* prev;
};

// One thread's parts in the current job. Reset by the caller before it publishes the job.
struct alignas(64) PartClock {
  std::atomic<int64_t> first_start{0};  // 0: ran no part
  std::atomic<int64_t> last_end{0};
  std::atomic<int64_t> busy_ns{0};
  std::atomic<int> parts{0};
  void reset() {
    first_start.store(0, std::memory_order_relaxed);
    last_end.store(0, std::memory_order_relaxed);
    busy_ns.store(0, std::memory_order_relaxed);
    parts.store(0, std::memory_order_relaxed);
  }
  void add(int64_t t0, int64_t t1) {  // only the owning thread writes
    if (first_start.load(std::memory_order_relaxed) == 0) first_start.store(t0, std::memory_order_relaxed);
    last_end.store(t1, std::memory_order_relaxed);
    busy_ns.store(busy_ns.load(std::memory_order_relaxed) + (t1 - t0), std::memory_order_relaxed);
    parts.store(parts.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
};

// One job as the caller saw it. clocks: one per team thread (thread 0 the caller), or null for a
// job that ran serially on the caller.
struct Job {
  int n_parts = 0;
  int n_threads = 1;
  int64_t enter_ns = 0;    // the caller entered team_run
  int64_t publish_ns = 0;  // the job was visible to the workers
  int64_t exit_ns = 0;     // the caller saw every part done
  const PartClock* clocks = nullptr;
};
void record(const Job& job);

}  // namespace strata::kernels::cpu::team_profile
