// A persistent team of threads for the CPU engine's decode-sized ops (the int8 and f32-activation
// GEMVs, decode attention).
//
// Why not oneTBB's parallel_for per op: a decode step is a few ops per layer, each a few to a few
// hundred KB of weights, i.e. a few microseconds of work per thread. A parallel_for per op (tasks
// spawned, sleeping workers woken, work stolen, the join) cost as much as the work of a small matrix,
// so decode stopped scaling at 4 threads. A team keeps its workers between ops: an idle worker polls
// a generation counter (so the next op of the step starts within a cache-line transfer), then
// sleeps on it (a futex, through std::atomic::wait) so that an idle process burns no cores.
//
// An op is cut into parts by its size alone, and each thread owns a fixed range of them (parts_of),
// so a thread reads the same rows at every step (its cache keeps them where they fit). A thread
// that has finished its own parts takes unclaimed parts of the others (one atomic add per part on
// the owner's counter, no task queues), and the caller waits for the parts to be done, not for
// every worker to wake: a thread preempted by another process (cores shared or oversubscribed)
// delays a job by at most the part it is in. (On a shared 2-core machine, static ownership with a
// barrier over all workers decoded 2.5x slower than oneTBB, 50x while the wait was pure polling.)
//
// Contract:
// - The caller of run() is thread 0 of the job and runs its own share; n_threads - 1 workers are
//   started by the constructor. One run() at a time per team (the team is not a lock: the shared
//   team below takes one).
// - A part must not throw: an exception from a part calls std::terminate on any thread (the other
//   threads are still running parts of the same job; nothing could unwind safely).
// - A part must not call run() (of any team) or team_run(): asserted. A nested job could deadlock on
//   the busy team, and kernels keep the caller's thread_local scratch (gemv_q8.cpp) live across a run.
// - Which thread runs a part is not fixed (see above); parts run concurrently, each exactly once,
//   and all have returned when run() returns.
// - Per-part scratch belongs to the caller (e.g. one buffer per part index), not to thread_locals
//   of the workers: the ASan build's leak check at exit reported the workers' thread_local buffers
//   (attention.cpp had one), failing every CI test that decoded on the CPU.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/team_profile.h"

namespace strata::kernels::cpu {

class ThreadTeam {
 public:
  // How long an idle worker (and the caller waiting at the barrier) polls before it sleeps: longer
  // than the serial gaps of a decode step (norms, RoPE, sampling between steps: tens of us), short
  // enough that a process that stopped decoding gives its cores back within a millisecond.
  static constexpr std::chrono::microseconds kDefaultSpin{1000};

  // n_threads >= 1, counting the caller.
  explicit ThreadTeam(int n_threads, std::chrono::microseconds spin = kDefaultSpin);
  ~ThreadTeam();  // stops and joins the workers; no run() may be in progress
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return size_; }

  // Calls fn(p) exactly once for every p in [0, n_parts), and returns when all have returned.
  // n_parts == 1 (or a team of 1) runs on the caller alone.
  template <typename Fn>
  void run(int n_parts, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_ref(n_parts, PartRef{const_cast<void*>(static_cast<const void*>(&fn)),
                             [](void* f, int p) { (*static_cast<F*>(f))(p); }});
  }

  // The parts thread t of n owns: [ceil(t * n_parts / n), ceil((t + 1) * n_parts / n)), so thread 0
  // (the caller) owns part 0 and, with n_parts < n, the other parts go to spread-out threads.
  static std::pair<int, int> parts_of(int thread, int n_threads, int n_parts);

  // run() without the template: fn.call(fn.ctx, p) per part.
  struct PartRef {
    void* ctx;
    void (*call)(void* ctx, int part);
  };
  void run_ref(int n_parts, PartRef fn);

 private:
  void worker(int thread);
  void work(int thread) noexcept;  // own parts, then the others' unclaimed ones

  struct alignas(64) Slot {
    std::atomic<uint64_t> next{0};  // a thread's parts: end << 32 | next unclaimed (see work())
  };

  int size_;
  std::chrono::microseconds spin_;
  std::unique_ptr<Slot[]> slots_;  // one per thread
  std::vector<std::thread> workers_;
  std::unique_ptr<team_profile::PartClock[]> clocks_;  // one per thread where STRATA_TEAM_PROFILE is on
  // The job: written by run() while no valid part can be claimed, read by a thread after it has
  // claimed one (the slots' release stores and the claim's acquire order them).
  PartRef fn_{nullptr, nullptr};
  int n_parts_ = 0;
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped by run() to wake the workers
  alignas(64) std::atomic<int> done_{0};             // parts of the job done
};

// True on a thread that is running a part of a team job (workers always; a caller during run()).
bool in_team_task();

// The process-wide team the CPU kernels use, sized like oneTBB's parallelism where it is called
// (team_threads), so `-t` (a tbb::global_control) and an enclosing tbb::task_arena still set the
// thread count, as they set oneTBB's: the smaller of the two, so -t above the core count gives the
// core count, as it did. The team is rebuilt when that count changes between calls (rare: benches
// that sweep it). If another thread holds the team, the parts run serially on the caller (same results; no
// waiting on an unrelated job). Not from inside a team task (asserted).
int team_threads();
template <typename Fn>
void team_run(int n_parts, Fn&& fn);

// Implementation detail of team_run.
void team_run_ref(int n_parts, ThreadTeam::PartRef fn);

template <typename Fn>
void team_run(int n_parts, Fn&& fn) {
  using F = std::remove_reference_t<Fn>;
  team_run_ref(n_parts, ThreadTeam::PartRef{const_cast<void*>(static_cast<const void*>(&fn)),
                                             [](void* f, int p) { (*static_cast<F*>(f))(p); }});
}

}  // namespace strata::kernels::cpu
