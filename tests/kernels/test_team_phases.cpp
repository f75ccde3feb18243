// ThreadTeam::run_phases (kernels/cpu/thread_team.h): every part of every phase runs exactly once,
// each serial step once, in the phases' order (a step or part of phase i sees every write of phase
// i - 1), for teams of 1, 2, 3 and 7 threads, phases with no parts, back-to-back jobs (no lost
// wake-up), a stuck part's siblings taken over, and the shared team's serial fallback.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <tbb/global_control.h>

#include "kernels/cpu/thread_team.h"

namespace kc = strata::kernels::cpu;
using namespace std::chrono_literals;

namespace {

// A chain of phases over one array: phase i's parts write a[i][p] = f(sum of phase i - 1's values
// and of the step before i), so an unordered or repeated part gives another value.
struct Chain {
  std::vector<int> parts;                        // per phase
  std::vector<std::vector<int64_t>> a;           // per phase, per part
  std::vector<std::vector<std::atomic<int>>> runs;
  std::vector<int64_t> step;                     // per phase: its `before` step's value
  std::vector<std::atomic<int>> step_runs;
  std::atomic<int> after_runs{0};
  int64_t after_value = -1;
  std::atomic<int> bad_context{0};               // a step or part outside a team task

  explicit Chain(std::vector<int> p) : parts(std::move(p)), a(parts.size()), runs(parts.size()), step(parts.size(), -1),
                                       step_runs(parts.size()) {
    for (size_t i = 0; i < parts.size(); ++i) {
      a[i].assign(size_t(parts[i]), -1);
      runs[i] = std::vector<std::atomic<int>>(size_t(parts[i]));
    }
  }
  int64_t sum_before(size_t i) const {  // what phase i's step reads: every value of phase i - 1
    if (i == 0) return 7;
    int64_t s = step[i - 1] * 3;
    for (int64_t v : a[i - 1]) s += v;
    return s;
  }
  // The serial reference.
  static std::vector<int64_t> expected(const std::vector<int>& parts) {
    Chain c(parts);
    for (size_t i = 0; i < parts.size(); ++i) {
      c.step[i] = c.sum_before(i) % 1000003;
      for (int p = 0; p < parts[i]; ++p) c.a[i][size_t(p)] = (c.step[i] * 31 + p) % 1000003;
    }
    std::vector<int64_t> all;
    for (size_t i = 0; i < parts.size(); ++i) {
      all.push_back(c.step[i]);
      all.insert(all.end(), c.a[i].begin(), c.a[i].end());
    }
    all.push_back(c.sum_before(parts.size()));
    return all;
  }
  std::vector<int64_t> values() const {
    std::vector<int64_t> all;
    for (size_t i = 0; i < parts.size(); ++i) {
      all.push_back(step[i]);
      all.insert(all.end(), a[i].begin(), a[i].end());
    }
    all.push_back(after_value);
    return all;
  }
};

// Runs the chain through `run` (a team's run_phases or team_run_phases).
template <typename Run>
void run_chain(Chain& c, Run run) {
  struct Step {
    Chain* c;
    size_t i;
    void operator()() const {
      if (!kc::in_team_task()) c->bad_context.fetch_add(1);
      c->step_runs[i].fetch_add(1);
      c->step[i] = c->sum_before(i) % 1000003;
    }
  };
  struct Part {
    Chain* c;
    size_t i;
    void operator()(int p) const {
      if (!kc::in_team_task()) c->bad_context.fetch_add(1);
      c->runs[i][size_t(p)].fetch_add(1);
      c->a[i][size_t(p)] = (c->step[i] * 31 + p) % 1000003;
    }
  };
  std::vector<Step> steps;
  std::vector<Part> part_fns;
  for (size_t i = 0; i < c.parts.size(); ++i) steps.push_back({&c, i}), part_fns.push_back({&c, i});
  std::vector<kc::ThreadTeam::Phase> phases(c.parts.size());
  for (size_t i = 0; i < c.parts.size(); ++i)
    phases[i] = {c.parts[i], kc::part_ref(part_fns[i]), kc::part_ref(steps[i])};
  auto after = [&c] {
    c.after_runs.fetch_add(1);
    c.after_value = c.sum_before(c.parts.size());
  };
  run(phases.data(), int(phases.size()), kc::part_ref(after));
}

void check_chain(Chain& c) {
  CHECK(c.values() == Chain::expected(c.parts));
  for (size_t i = 0; i < c.parts.size(); ++i) {
    CHECK(c.step_runs[i].load() == 1);
    for (auto& r : c.runs[i]) CHECK(r.load() == 1);
  }
  CHECK(c.after_runs.load() == 1);
  CHECK(c.bad_context.load() == 0);
}

const std::vector<std::vector<int>> kShapes = {
    {}, {0}, {1}, {5}, {3, 0, 2}, {0, 0, 4}, {16, 1, 16, 7, 2}, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, {100, 3}};

}  // namespace

TEST_CASE("team phases: every part and step once, phases in order, teams of 1/2/3/7", "[thread_team]") {
  for (int size : {1, 2, 3, 7}) {
    kc::ThreadTeam team(size);
    for (const auto& shape : kShapes)
      for (int rep = 0; rep < 20; ++rep) {
        INFO("team of " << size << ", " << shape.size() << " phases, rep " << rep);
        Chain c(shape);
        run_chain(c, [&](auto* ph, int n, auto after) { team.run_phases(ph, n, after); });
        check_chain(c);
        CHECK_FALSE(kc::in_team_task());
      }
  }
}

TEST_CASE("team phases: back-to-back jobs with sleeping workers, mixed with plain runs", "[thread_team]") {
  for (auto spin : {kc::ThreadTeam::kDefaultSpin, std::chrono::microseconds(0)}) {
    kc::ThreadTeam team(4, spin);
    for (int j = 0; j < (spin.count() ? 5000 : 2000); ++j) {
      Chain c({1 + j % 5, j % 3, 4});
      run_chain(c, [&](auto* ph, int n, auto after) { team.run_phases(ph, n, after); });
      REQUIRE(c.values() == Chain::expected(c.parts));
      std::atomic<int> n{0};
      team.run(1 + j % 6, [&](int) { n.fetch_add(1); });
      REQUIRE(n.load() == 1 + j % 6);
    }
  }
}

TEST_CASE("team phases: a thread stuck in a part does not hold up the phase's other parts", "[thread_team]") {
  // As thread_team's test: part 2 of phase 1 waits for part 3, which its owner (the stuck thread)
  // would run next; another thread must take it, and the phase after must still see both.
  kc::ThreadTeam team(3);
  for (int rep = 0; rep < 50; ++rep) {
    std::atomic<bool> part3{false}, waited_out{false};
    std::atomic<int> after_phase{0};
    auto first = [&](int) {};
    auto second = [&](int p) {
      if (p == 3) part3 = true;
      if (p != 2) return;
      const auto until = std::chrono::steady_clock::now() + 10s;
      while (!part3 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      waited_out = !part3;
    };
    auto third = [&](int) { after_phase.fetch_add(part3 ? 1 : 100); };
    const kc::ThreadTeam::Phase phases[3] = {{3, kc::part_ref(first)}, {6, kc::part_ref(second)}, {2, kc::part_ref(third)}};
    team.run_phases(phases, 3);
    CHECK_FALSE(waited_out);
    CHECK(after_phase.load() == 2);
  }
}

TEST_CASE("team phases: the shared team, and its serial fallback for one thread", "[thread_team]") {
  for (int threads : {1, 2, 3}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
    for (const auto& shape : kShapes) {
      INFO(threads << " threads, " << shape.size() << " phases");
      Chain c(shape);
      run_chain(c, [](auto* ph, int n, auto after) { kc::team_run_phases(ph, n, after); });
      check_chain(c);
    }
  }
}
