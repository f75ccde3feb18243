// A Chrome/Perfetto trace of what one run did, drawn as one row ("track") per resource: host
// work, GPU compute, host->device copies, disk reads. Open the file in ui.perfetto.dev (or
// chrome://tracing). Spans are "complete" events ({"ph": "X"}) in microseconds since the trace
// was created; GPU spans are placed on the same clock by offload::GpuTimeline.
//
// Thread-safe: spans may be added from any thread. Bounded: past `max_spans` further spans are
// counted, not kept (a 128K-token run must not grow a trace without limit), and the file says so.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class Trace {
 public:
  explicit Trace(size_t max_spans = 2'000'000);

  // Microseconds since the trace was created (steady clock).
  double now_us() const;
  void span(std::string_view track, std::string name, double start_us, double dur_us);
  // A span from `start_us` to now.
  void span_until_now(std::string_view track, std::string name, double start_us) {
    const double end = now_us();
    span(track, std::move(name), start_us, end - start_us);
  }
  size_t size() const;
  size_t dropped() const;
  // The trace as Chrome trace-event JSON.
  std::string json() const;

 private:
  struct Span {
    uint32_t track;
    std::string name;
    double start_us, dur_us;
  };
  std::chrono::steady_clock::time_point start_;
  size_t max_spans_;
  mutable std::mutex mu_;
  std::map<std::string, uint32_t, std::less<>> tracks_;
  std::vector<Span> spans_;
  size_t dropped_ = 0;
};

// Times a host-side scope into a trace (no-op when trace is null).
class TraceScope {
 public:
  TraceScope(Trace* trace, std::string_view track, std::string name)
      : trace_(trace), track_(track), name_(std::move(name)), start_(trace ? trace->now_us() : 0) {}
  ~TraceScope() {
    if (trace_) trace_->span_until_now(track_, std::move(name_), start_);
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Trace* trace_;
  std::string_view track_;
  std::string name_;
  double start_;
};

}  // namespace strata
