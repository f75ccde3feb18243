// GpuTimeline: puts GPU work (kernels on the compute stream, copies on the copy stream) into a
// Trace, on the trace's host clock. A span is delimited by two timing events recorded on a stream;
// flush(), called after the engine synchronized its compute stream at the end of an eval, reads the
// GPU times of the spans that have completed and converts them; spans still running (copies the
// weight store prefetched for the next step) wait for a later flush, so tracing never makes the
// host wait for the copy stream.
//
// Clock: each flush re-anchors (records an event, waits for it, reads the host clock), so GPU times
// are offsets of at most one eval from a known host time: cudaEventElapsedTime's float milliseconds
// stay sub-microsecond precise however long the run. Only used when a trace was asked for: the
// extra events and the anchor's wait cost a few microseconds per block.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/trace.h"
#include "kernels/cuda/cuda_api.h"

namespace strata::offload {

class GpuTimeline {
 public:
  static Result<std::unique_ptr<GpuTimeline>> create(Trace& trace, kernels::cuda::Stream anchor);
  ~GpuTimeline();
  GpuTimeline(const GpuTimeline&) = delete;
  GpuTimeline& operator=(const GpuTimeline&) = delete;

  // Records a timing event on s; returns its mark for span().
  Result<uint32_t> mark(kernels::cuda::Stream s);
  // A span between two marks; track must outlive the timeline (string literals).
  void span(std::string_view track, std::string name, uint32_t begin_mark, uint32_t end_mark);
  // Converts the completed spans, then re-anchors on the anchor stream.
  Status flush();
  Trace& trace() { return trace_; }

 private:
  GpuTimeline(Trace& trace, kernels::cuda::Stream anchor) : trace_(trace), anchor_stream_(anchor) {}
  Status anchor();

  struct Pending {
    std::string_view track;
    std::string name;
    uint32_t begin, end;
  };
  Trace& trace_;
  kernels::cuda::Stream anchor_stream_;
  kernels::cuda::Event anchor_event_ = nullptr;
  double anchor_us_ = 0;
  std::vector<kernels::cuda::Event> events_;  // pool, indexed by mark
  std::vector<uint32_t> free_;                // marks not in use
  std::vector<Pending> pending_;
};

}  // namespace strata::offload
