#include "offload/gpu_timeline.h"

namespace strata::offload {

namespace cuda = kernels::cuda;

Result<std::unique_ptr<GpuTimeline>> GpuTimeline::create(Trace& trace, cuda::Stream anchor_stream) {
  std::unique_ptr<GpuTimeline> t(new GpuTimeline(trace, anchor_stream));
  auto e = cuda::event_create_timed();
  if (!e) return e.status();
  t->anchor_event_ = *e;
  STRATA_TRY(t->anchor());
  return t;
}

GpuTimeline::~GpuTimeline() {
  cuda::event_destroy(anchor_event_);
  for (auto e : events_) cuda::event_destroy(e);
}

Status GpuTimeline::anchor() {
  STRATA_TRY(cuda::event_record(anchor_event_, anchor_stream_));
  STRATA_TRY(cuda::event_synchronize(anchor_event_));
  anchor_us_ = trace_.now_us();
  return {};
}

Result<uint32_t> GpuTimeline::mark(cuda::Stream s) {
  if (free_.empty()) {
    auto e = cuda::event_create_timed();
    if (!e) return e.status();
    free_.push_back(uint32_t(events_.size()));
    events_.push_back(*e);
  }
  const uint32_t m = free_.back();
  STRATA_TRY(cuda::event_record(events_[m], s));
  free_.pop_back();
  return m;
}

void GpuTimeline::span(std::string_view track, std::string name, uint32_t begin_mark, uint32_t end_mark) {
  pending_.push_back({track, std::move(name), begin_mark, end_mark});
}

Status GpuTimeline::flush() {
  std::vector<Pending> later;
  for (auto& p : pending_) {
    auto done = cuda::event_done(events_[p.end]);
    if (!done) return done.status();
    if (!*done) {
      later.push_back(std::move(p));
      continue;
    }
    // Times relative to the anchor may be negative (a span that began before it): that is fine.
    auto b = cuda::event_elapsed_ms(anchor_event_, events_[p.begin]);
    if (!b) return b.status();
    auto e = cuda::event_elapsed_ms(anchor_event_, events_[p.end]);
    if (!e) return e.status();
    trace_.span(p.track, std::move(p.name), anchor_us_ + *b * 1e3, (*e - *b) * 1e3);
    free_.push_back(p.begin);
    free_.push_back(p.end);
  }
  pending_ = std::move(later);
  return anchor();
}

}  // namespace strata::offload
