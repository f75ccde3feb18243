// The CPU kernels' thread team (kernels/cpu/thread_team.h): every part once, parts taken over from
// a stuck thread, no deadlock over many back-to-back or spaced-out jobs, the shared team's sizing and
// fallback, and the documented aborts (nested runs, a throwing part) in a forked child.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "kernels/cpu/team_parts.h"
#include "kernels/cpu/thread_team.h"

namespace kc = strata::kernels::cpu;
using namespace std::chrono_literals;

namespace {

// Runs fn in a forked child; returns the signal that ended it (0 if it exited normally).
template <typename Fn>
int child_signal(Fn fn) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL);  // not Catch2's handler: it would report the expected abort
    std::freopen("/dev/null", "w", stderr);  // nor the abort's message
    fn();
    ::_exit(0);
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {}
  return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

}  // namespace

TEST_CASE("thread team: parts_of cuts 0..n into ordered ranges, part 0 on the caller", "[thread_team]") {
  for (int threads : {1, 2, 3, 7, 16})
    for (int parts : {0, 1, 2, 3, 5, 16, 17, 100}) {
      int next = 0;
      for (int t = 0; t < threads; ++t) {
        const auto [p0, p1] = kc::ThreadTeam::parts_of(t, threads, parts);
        CHECK(p0 == next);
        CHECK(p1 >= p0);
        CHECK(p1 - p0 <= (parts + threads - 1) / threads);
        next = p1;
      }
      CHECK(next == parts);
      if (parts > 0) CHECK(kc::ThreadTeam::parts_of(0, threads, parts).second >= 1);
    }
}

TEST_CASE("thread team: every part runs once and equals a serial loop", "[thread_team]") {
  for (int size : {1, 2, 3, 4, 8}) {
    kc::ThreadTeam team(size);
    REQUIRE(team.size() == size);
    for (int parts : {0, 1, 2, 3, 7, 64, 1000}) {
      INFO("team of " << size << ", " << parts << " parts");
      std::vector<std::atomic<int>> runs(static_cast<size_t>(parts));
      std::vector<char> in_task(static_cast<size_t>(parts), 0);  // Catch2's CHECK is not for other threads
      std::vector<double> y(static_cast<size_t>(parts), -1.0), ref(static_cast<size_t>(parts));
      for (int p = 0; p < parts; ++p) ref[size_t(p)] = std::sin(p) * std::sqrt(double(p) + 1);
      team.run(parts, [&](int p) {
        runs[size_t(p)].fetch_add(1);
        in_task[size_t(p)] = kc::in_team_task();
        y[size_t(p)] = std::sin(p) * std::sqrt(double(p) + 1);
      });
      CHECK_FALSE(kc::in_team_task());
      for (int p = 0; p < parts; ++p) CHECK(runs[size_t(p)].load() == 1);
      CHECK(std::count(in_task.begin(), in_task.end(), 1) == parts);
      CHECK(y == ref);
    }
  }
}

TEST_CASE("thread team: a thread stuck in a part does not hold up the parts it owns next", "[thread_team]") {
  // Thread 1 of 3 owns parts 2 and 3 of 6. Whoever runs part 2 waits for part 3: the job finishes
  // only if another thread takes part 3 (a worker preempted mid-job, in miniature).
  kc::ThreadTeam team(3);
  REQUIRE(kc::ThreadTeam::parts_of(1, 3, 6) == std::pair<int, int>(2, 4));
  for (int rep = 0; rep < 50; ++rep) {
    std::atomic<bool> part3{false}, waited_out{false};
    team.run(6, [&](int p) {
      if (p == 3) part3 = true;
      if (p != 2) return;
      const auto until = std::chrono::steady_clock::now() + 10s;
      while (!part3 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      waited_out = !part3;
    });
    CHECK_FALSE(waited_out);
  }
}

TEST_CASE("thread team: many back-to-back tiny jobs do not deadlock", "[thread_team]") {
  // Polling workers (the default spin), and workers that sleep before every job (spin 0: each job
  // wakes them through the futex), where a lost wake-up would hang.
  for (auto spin : {kc::ThreadTeam::kDefaultSpin, std::chrono::microseconds(0)}) {
    kc::ThreadTeam team(4, spin);
    const int jobs = spin.count() ? 100000 : 20000;
    std::atomic<int64_t> sum{0};
    for (int j = 0; j < jobs; ++j) team.run(1 + j % 6, [&](int p) { sum.fetch_add(p + 1, std::memory_order_relaxed); });
    int64_t want = 0;
    for (int j = 0; j < jobs; ++j) want += int64_t(1 + j % 6) * (2 + j % 6) / 2;
    CHECK(sum.load() == want);
  }
}

TEST_CASE("thread team: jobs after the workers went to sleep", "[thread_team]") {
  kc::ThreadTeam team(3, 50us);
  for (int j = 0; j < 20; ++j) {
    std::this_thread::sleep_for(300us);  // longer than the spin: every worker sleeps in between
    std::atomic<int> n{0};
    team.run(3, [&](int) { n.fetch_add(1); });
    CHECK(n.load() == 3);
  }
}

TEST_CASE("thread team: idle workers sleep instead of spinning", "[thread_team]") {
  auto cpu_s = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  kc::ThreadTeam team(4);
  std::atomic<int> n{0};
  team.run(4, [&](int) { n.fetch_add(1); });
  const double before = cpu_s();
  std::this_thread::sleep_for(300ms);
  // Three workers polling for 300 ms would take 0.9 s of CPU; asleep after kDefaultSpin, ~3 ms.
  CHECK(cpu_s() - before < 0.1);
  team.run(4, [&](int) { n.fetch_add(1); });
  CHECK(n.load() == 8);
}

TEST_CASE("thread team: the shared team follows oneTBB's thread limit", "[thread_team]") {
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
    CHECK(kc::team_threads() <= 2);
    std::vector<std::thread::id> who(64);
    kc::team_run(64, [&](int p) { who[size_t(p)] = std::this_thread::get_id(); });
    CHECK(std::set<std::thread::id>(who.begin(), who.end()).size() <= 2);
  }
  tbb::task_arena one(1);
  one.execute([] { CHECK(kc::team_threads() == 1); });
  // Resized back and forth: still every part once.
  for (int limit : {3, 1, 2}) {
    tbb::global_control g(tbb::global_control::max_allowed_parallelism, size_t(limit));
    std::vector<std::atomic<int>> runs(40);
    kc::team_run(40, [&](int p) { runs[size_t(p)].fetch_add(1); });
    for (auto& r : runs) CHECK(r.load() == 1);
  }
}

TEST_CASE("thread team: a second caller while the shared team is busy runs its parts itself", "[thread_team]") {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
  std::atomic<bool> other_done{false};
  int other_runs = 0;
  std::thread other;
  // Part 0 of this job (on this thread) holds the team until the other thread's job has finished:
  // the other job must not wait for the team.
  kc::team_run(2, [&](int p) {
    if (p != 0) return;
    other = std::thread([&] {
      kc::team_run(5, [&](int) { ++other_runs; });  // serial: a plain int is safe
      other_done = true;
    });
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (!other_done && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  });
  other.join();
  CHECK(other_done);
  CHECK(other_runs == 5);
}

TEST_CASE("thread team: a nested run or a throwing part aborts", "[thread_team]") {
  // Each in a forked child, for a team of `size` (the caller alone at 1) and for the shared team.
  auto nested_run = [](int size) {
    return child_signal([size] {
      kc::ThreadTeam team(size);
      team.run(2, [&](int) { team.run(2, [](int) {}); });
    });
  };
  auto nested_team_run = [](int parts) {
    return child_signal([parts] { kc::team_run(parts, [parts](int) { kc::team_run(parts, [](int) {}); }); });
  };
  auto throwing_part = [](int size) {  // the last part throws
    return child_signal([size] {
      const int parts = std::max(2, size);
      kc::ThreadTeam team(size);
      team.run(parts, [parts](int p) {
        if (p == parts - 1) throw std::runtime_error("last part");
      });
    });
  };
  // Teams of one and single-part jobs first: no thread is started in the child, so this runs under
  // ThreadSanitizer too (which ends a forked child that starts threads).
  CHECK(nested_run(1) == SIGABRT);
  CHECK(nested_team_run(1) == SIGABRT);
  CHECK(throwing_part(1) == SIGABRT);
#ifndef __SANITIZE_THREAD__
  // And on workers.
  CHECK(nested_run(2) == SIGABRT);
  CHECK(nested_team_run(2) == SIGABRT);
  CHECK(throwing_part(3) == SIGABRT);
#endif
  // The team still works in this process (the children had their own).
  std::atomic<int> n{0};
  kc::team_run(4, [&](int) { n.fetch_add(1); });
  CHECK(n.load() == 4);
}

TEST_CASE("thread team: RowParts gives every row of every matrix to one part, in whole groups", "[thread_team]") {
  // Three matrices of one input (Q, K, V of a 4:1 GQA model: different row sizes, as Q4_K vs Q6_K).
  const strata::kernels::WeightView w[3] = {{nullptr, strata::GgmlType::Q4_K, 512, 512, 288},
                                            {nullptr, strata::GgmlType::Q4_K, 512, 128, 288},
                                            {nullptr, strata::GgmlType::Q6_K, 512, 130, 420}};
  const uint64_t offset[4] = {0, 512 * 288, 640 * 288, 640 * 288 + 130 * 420};
  for (int64_t align : {1, 8})
    for (int n_parts : {1, 2, 3, 7, 16, 64}) {
      INFO(n_parts << " parts, align " << align);
      kc::RowParts parts(offset[3], align);
      parts.n_parts = n_parts;  // whatever this machine's team size
      int64_t next[3] = {0, 0, 0};
      uint64_t most = 0;
      for (int p = 0; p < n_parts; ++p) {
        uint64_t bytes = 0;
        for (int j = 0; j < 3; ++j) {
          const auto [r0, r1] = parts.rows(p, offset[j], w[j]);
          if (r0 == r1) continue;
          CHECK(r0 == next[j]);
          CHECK(r0 % align == 0);
          CHECK((r1 % align == 0 || r1 == w[j].n_out));
          next[j] = r1;
          bytes += uint64_t(r1 - r0) * w[j].row_bytes;
        }
        most = std::max(most, bytes);
      }
      for (int j = 0; j < 3; ++j) CHECK(next[j] == w[j].n_out);
      // Balanced: its share of the bytes, give or take a group (and a row) at each end.
      CHECK(most <= offset[3] / uint64_t(n_parts) + 1 + 2 * uint64_t(align + 1) * 420);
    }
}
