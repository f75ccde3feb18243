#include "kernels/cpu/thread_team.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>

#include <pthread.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/status.h"
#include "kernels/cpu/team_profile.h"

namespace strata::kernels::cpu {

namespace {

thread_local bool t_in_task = false;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Waits until `a` differs from `old` and returns the new value, in three phases:
// - polls with pause for kPausePoll: the gap between two ops of a step on a dedicated core;
// - then polls with sched_yield until `spin` has passed: on an idle core yield returns at once (a
//   poll every ~microsecond), but where the cores are oversubscribed (other processes, more threads
//   than cores) it hands the core to a runnable thread, which may be the very thread this one waits
//   for (pure pause polling there cost a preempted peer's whole time slice per op: 50x slower);
// - then sleeps in std::atomic::wait (a futex on Linux; notify_* costs one load when nobody sleeps).
constexpr std::chrono::microseconds kPausePoll{20};

template <typename T>
T wait_change(const std::atomic<T>& a, T old, std::chrono::microseconds spin) {
  T v = a.load(std::memory_order_acquire);
  if (v != old) return v;
  const auto t0 = std::chrono::steady_clock::now();
  const auto pause_until = t0 + std::min(spin, kPausePoll), until = t0 + spin;
  for (int i = 1;; ++i) {
    cpu_relax();
    if ((v = a.load(std::memory_order_acquire)) != old) return v;
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= pause_until) break;
  }
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
    if ((v = a.load(std::memory_order_acquire)) != old) return v;
  }
  while ((v = a.load(std::memory_order_acquire)) == old) a.wait(old, std::memory_order_acquire);
  return v;
}

// Sets t_in_task for a scope (the caller's share of a job, a serial fallback).
struct TaskScope {
  TaskScope() { t_in_task = true; }
  ~TaskScope() { t_in_task = false; }
};

// Every part on the calling thread (a team of one, one part, a busy shared team). noexcept like
// the team's threads, so that a throwing part ends the process whichever way its job ran.
void run_serial(int n_parts, ThreadTeam::PartRef fn) noexcept {
  TaskScope scope;
  for (int p = 0; p < n_parts; ++p) fn.call(fn.ctx, p);
}

// run_serial, recorded as a job of one thread where STRATA_TEAM_PROFILE is on.
void run_serial_profiled(int n_parts, ThreadTeam::PartRef fn) noexcept {
  if (n_parts <= 0 || !team_profile::enabled()) return run_serial(n_parts, fn);
  const int64_t enter_ns = team_profile::now_ns();
  run_serial(n_parts, fn);
  team_profile::record({n_parts, 1, enter_ns, enter_ns, team_profile::now_ns(), nullptr});
}

}  // namespace

bool in_team_task() { return t_in_task; }

ThreadTeam::ThreadTeam(int n_threads, std::chrono::microseconds spin)
    : size_(n_threads), spin_(spin), slots_(new Slot[size_t(std::max(1, n_threads))]) {
  if (team_profile::enabled()) clocks_.reset(new team_profile::PartClock[size_t(std::max(1, n_threads))]);
  STRATA_CHECK(n_threads >= 1, "ThreadTeam: {} threads", n_threads);
  workers_.reserve(size_t(n_threads - 1));
  for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadTeam::~ThreadTeam() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

std::pair<int, int> ThreadTeam::parts_of(int thread, int n_threads, int n_parts) {
  auto edge = [&](int t) { return int((int64_t(t) * n_parts + n_threads - 1) / n_threads); };
  return {edge(thread), edge(thread + 1)};
}

// A slot's counter: the end of its range (high half) and the next unclaimed part (low half), one
// word so that a claim (fetch_add) sees both from the same job. A claim past the end changes
// nothing that matters (the next job stores the word anew).
namespace {
constexpr uint64_t pack(int end, int next) { return uint64_t(uint32_t(end)) << 32 | uint32_t(next); }
}  // namespace

void ThreadTeam::work(int thread) noexcept {
  // Own parts first, then the others' from the next thread on. A valid claim (next < end) keeps
  // its job alive until this thread counts the part done, so fn_ and n_parts_ read after it are
  // that job's, whichever job this thread thought it was serving (the slot's release store and
  // this acquire-RMW order them).
  for (int k = 0; k < size_; ++k) {
    std::atomic<uint64_t>& slot = slots_[size_t((thread + k) % size_)].next;
    for (;;) {
      // Look before claiming: a load shares the line, an atomic add takes it (a scan of 15 empty
      // slots by add cost microseconds of line transfers per job on 16 cores).
      uint64_t c = slot.load(std::memory_order_acquire);
      if (uint32_t(c) >= uint32_t(c >> 32)) break;
      c = slot.fetch_add(1, std::memory_order_acq_rel);
      const int end = int(c >> 32), p = int(uint32_t(c));
      if (p >= end) break;
      const PartRef fn = fn_;
      const int n_parts = n_parts_;
      if (clocks_) {
        const int64_t t0 = team_profile::now_ns();
        fn.call(fn.ctx, p);
        clocks_[size_t(thread)].add(t0, team_profile::now_ns());
      } else {
        fn.call(fn.ctx, p);
      }
      // seq_cst: the caller's sleep (atomic::wait) and this notify must not miss each other.
      if (done_.fetch_add(1) + 1 == n_parts) done_.notify_one();
      if (p + 1 == end) break;  // that was the slot's last part
    }
  }
}

void ThreadTeam::worker(int thread) {
  t_in_task = true;  // for life: a worker only ever runs parts
  uint32_t seen = 0;
  for (;;) {
    seen = wait_change(generation_, seen, spin_);
    if (stop_.load()) return;
    work(thread);
  }
}

void ThreadTeam::run_ref(int n_parts, PartRef fn) {
  STRATA_CHECK(!t_in_task, "ThreadTeam::run from inside a team task (nested parallel jobs are not supported)");
  if (n_parts <= 0) return;
  if (size_ == 1 || n_parts == 1) return run_serial_profiled(n_parts, fn);
  const int64_t enter_ns = clocks_ ? team_profile::now_ns() : 0;
  if (clocks_)
    for (int t = 0; t < size_; ++t) clocks_[size_t(t)].reset();
  // The previous job's parts are all done and its slots exhausted: nothing reads these now.
  fn_ = fn;
  n_parts_ = n_parts;
  done_.store(0, std::memory_order_relaxed);
  for (int t = 0; t < size_; ++t) {
    const auto [p0, p1] = parts_of(t, size_, n_parts);
    slots_[size_t(t)].next.store(pack(p1, p0), std::memory_order_release);
  }
  generation_.fetch_add(1);  // seq_cst: wakes pollers; see wait_change for sleepers
  generation_.notify_all();
  const int64_t publish_ns = clocks_ ? team_profile::now_ns() : 0;
  {
    TaskScope scope;
    work(0);
  }
  // The parts done, not every worker: one that never woke (preempted, asleep) delays nothing.
  for (int done = done_.load(std::memory_order_acquire); done != n_parts;)
    done = wait_change(done_, done, spin_);
  if (clocks_) team_profile::record({n_parts, size_, enter_ns, publish_ns, team_profile::now_ns(), clocks_.get()});
}

// ---- The process-wide team -------------------------------------------------------------------

namespace {

struct SharedTeam {
  std::mutex mutex;  // held for a whole job
  std::unique_ptr<ThreadTeam> team;
  SharedTeam() {
    // A fork()ed child has the team object but not its threads: it must start its own.
    pthread_atfork(nullptr, nullptr, [] { forked_child = true; });
  }
  static inline bool forked_child = false;
};

SharedTeam& shared_team() {
  static SharedTeam s;
  return s;
}

}  // namespace

int team_threads() {
  // The enclosing arena's size (a tbb::task_arena) capped by the global limit (-t sets a
  // tbb::global_control, which an arena's max_concurrency does not reflect).
  const auto limit = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  return std::max(1, int(std::min<size_t>(size_t(tbb::this_task_arena::max_concurrency()), limit)));
}

void team_run_ref(int n_parts, ThreadTeam::PartRef fn) {
  STRATA_CHECK(!t_in_task, "team_run from inside a team task (nested parallel jobs are not supported)");
  if (n_parts <= 1) return run_serial_profiled(n_parts, fn);
  // STRATA_THREAD_TEAM=0: the same parts through a oneTBB parallel_for per job, as before the team
  // (same results; for same-binary timing comparisons).
  static const bool use_tbb = [] {
    const char* e = std::getenv("STRATA_THREAD_TEAM");
    return e && std::string_view(e) == "0";
  }();
  if (use_tbb) {
    tbb::parallel_for(0, n_parts, [&](int p) {
      TaskScope scope;
      fn.call(fn.ctx, p);
    });
    return;
  }
  SharedTeam& s = shared_team();
  std::unique_lock lock(s.mutex, std::try_to_lock);
  if (!lock) return run_serial_profiled(n_parts, fn);  // another thread's job holds the team: run alone
  if (SharedTeam::forked_child) {
    (void)s.team.release();  // the parent's workers do not exist here; nothing to join
    SharedTeam::forked_child = false;
  }
  const int want = team_threads();
  if (!s.team || s.team->size() != want) {
    s.team.reset();
    s.team = std::make_unique<ThreadTeam>(want);
  }
  s.team->run_ref(n_parts, fn);
}

}  // namespace strata::kernels::cpu
