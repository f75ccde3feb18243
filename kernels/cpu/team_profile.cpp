#include "kernels/cpu/team_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace strata::kernels::cpu::team_profile {

namespace {

thread_local const char* t_label = "unlabelled";
thread_local int64_t t_last_exit_ns = 0;  // the calling thread's previous job

// A gap longer than this is between steps or phases (sampling, prompt, setup), not between two ops
// of a step: counted apart so that the per-step figures are not swamped.
constexpr int64_t kLongGapNs = 200'000;

struct Sums {
  int64_t jobs = 0, serial_jobs = 0, wall = 0, gap = 0, long_gaps = 0, publish = 0, wake_min = 0, wake_max = 0,
          tail = 0, busy = 0, caller_busy = 0, parts = 0, caller_parts = 0, threads_used = 0, n_long_gaps = 0;
};

struct Table {
  std::mutex mutex;
  std::map<std::tuple<std::string, int, int>, Sums> groups;  // (label, parts, threads)
  ~Table() { print(); }
  void print() {
    std::lock_guard lock(mutex);
    if (groups.empty()) return;
    std::vector<std::pair<std::tuple<std::string, int, int>, Sums>> rows(groups.begin(), groups.end());
    std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.wall + a.second.gap > b.second.wall + b.second.gap; });
    Sums t;
    std::fprintf(stderr,
                 "team profile (STRATA_TEAM_PROFILE): per job means in us; gap = the caller's serial time before "
                 "the job (gaps > %lld us counted apart); publish = enter to visible; wake = publish to a worker's "
                 "first part (min, max over workers with parts); tail = last part done to the caller seeing it; "
                 "eff = busy / (wall * threads)\n",
                 (long long)(kLongGapNs / 1000));
    std::fprintf(stderr, "%-14s %5s %3s %8s %8s %8s %7s %7s %7s %7s %7s %7s %6s %5s\n", "site", "parts", "thr", "jobs",
                 "wall", "gap", "publish", "wake0", "wake1", "tail", "busy", "caller", "used", "eff%");
    for (auto& [k, s] : rows) {
      const double n = double(std::max<int64_t>(1, s.jobs)), par = double(std::max<int64_t>(1, s.jobs - s.serial_jobs));
      std::fprintf(stderr, "%-14s %5d %3d %8lld %8.2f %8.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %6.1f %5.0f\n",
                   std::get<0>(k).c_str(), std::get<1>(k), std::get<2>(k), (long long)s.jobs, s.wall / n / 1e3,
                   s.gap / n / 1e3, s.publish / par / 1e3, s.wake_min / par / 1e3, s.wake_max / par / 1e3,
                   s.tail / par / 1e3, s.busy / n / 1e3, s.caller_busy / n / 1e3, double(s.threads_used) / n,
                   100.0 * double(s.busy) / double(std::max<int64_t>(1, s.wall * std::get<2>(k))));
      t.jobs += s.jobs, t.wall += s.wall, t.gap += s.gap, t.long_gaps += s.long_gaps, t.busy += s.busy;
      t.n_long_gaps += s.n_long_gaps;
    }
    std::fprintf(stderr,
                 "team profile total: %lld jobs, %.3f ms in jobs, %.3f ms of serial gaps between them (%.2f us a job), "
                 "%.3f ms of longer gaps (%lld), %.3f ms busy in parts\n",
                 (long long)t.jobs, t.wall / 1e6, t.gap / 1e6, t.gap / double(std::max<int64_t>(1, t.jobs)) / 1e3,
                 t.long_gaps / 1e6, (long long)t.n_long_gaps, t.busy / 1e6);
  }
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* e = std::getenv("STRATA_TEAM_PROFILE");
    const bool v = e && *e && std::string_view(e) != "0";
    if (v) table();  // constructed before any job, so destroyed (and printed) after them
    return v;
  }();
  return on;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Label::Label(const char* name) : prev(t_label) { t_label = name; }
Label::~Label() { t_label = prev; }

void record(const Job& job) {
  Sums d;
  d.jobs = 1;
  d.wall = job.exit_ns - job.enter_ns;
  const int64_t gap = t_last_exit_ns ? job.enter_ns - t_last_exit_ns : 0;
  t_last_exit_ns = job.exit_ns;
  (gap > kLongGapNs ? d.long_gaps : d.gap) = gap;
  d.n_long_gaps = gap > kLongGapNs;
  d.parts = job.n_parts;
  if (!job.clocks) {
    d.serial_jobs = 1, d.busy = d.caller_busy = d.wall, d.caller_parts = job.n_parts, d.threads_used = 1;
  } else {
    d.publish = job.publish_ns - job.enter_ns;
    int64_t wmin = INT64_MAX, wmax = 0, last = 0;
    for (int t = 0; t < job.n_threads; ++t) {
      const PartClock& c = job.clocks[t];
      const int64_t s = c.first_start.load(std::memory_order_relaxed);
      if (!s) continue;
      ++d.threads_used;
      d.busy += c.busy_ns.load(std::memory_order_relaxed);
      last = std::max(last, c.last_end.load(std::memory_order_relaxed));
      if (t == 0) {
        d.caller_busy = c.busy_ns.load(std::memory_order_relaxed), d.caller_parts = c.parts.load(std::memory_order_relaxed);
        continue;
      }
      wmin = std::min(wmin, s - job.publish_ns), wmax = std::max(wmax, s - job.publish_ns);
    }
    if (wmax) d.wake_min = wmin, d.wake_max = wmax;
    d.tail = last ? job.exit_ns - last : 0;
  }
  Table& tb = table();
  std::lock_guard lock(tb.mutex);
  Sums& s = tb.groups[{t_label, job.n_parts, job.clocks ? job.n_threads : 1}];
  s.jobs += d.jobs, s.serial_jobs += d.serial_jobs, s.wall += d.wall, s.gap += d.gap, s.long_gaps += d.long_gaps;
  s.publish += d.publish, s.wake_min += d.wake_min, s.wake_max += d.wake_max, s.tail += d.tail, s.busy += d.busy;
  s.n_long_gaps += d.n_long_gaps, s.caller_busy += d.caller_busy, s.parts += d.parts, s.caller_parts += d.caller_parts, s.threads_used += d.threads_used;
}

}  // namespace strata::kernels::cpu::team_profile
