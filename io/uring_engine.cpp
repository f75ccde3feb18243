// io_uring engine: one ring with queue_depth entries; reads are queued as SQEs and submitted in a
// batch when the caller waits (liburing's submit_and_wait), so a burst of reads costs one syscall.
#include "io/read_engine.h"

#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include <sys/uio.h>

#ifdef STRATA_HAVE_LIBURING
#include <liburing.h>
#endif

namespace strata::io {

#ifdef STRATA_HAVE_LIBURING
namespace {

class UringEngine final : public ReadEngine {
 public:
  explicit UringEngine(uint32_t qd) : qd_(qd) {}
  Status init() {
    if (const int e = io_uring_queue_init(qd_, &ring_, 0); e < 0)
      return Status::error("io_uring_queue_init: {}", std::strerror(-e));
    ready_ = true;
    return Status::ok();
  }
  ~UringEngine() override {
    if (!ready_) return;
    // Reads still in flight would write into buffers the caller may free: reap them first.
    while (in_kernel_ > 0 && broken_ == 0) (void)wait_one();
    io_uring_queue_exit(&ring_);
  }
  std::string name() const override { return "io_uring"; }
  uint32_t queue_depth() const override { return qd_; }

  void submit(const EngineRead& r) override {
    if (broken_ != 0) { failed_.push_back({r.tag, -int64_t(broken_)}); return; }
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {  // the SQ ring is full of unsubmitted entries: flush them
      flush();
      sqe = io_uring_get_sqe(&ring_);
      if (!sqe) { failed_.push_back({r.tag, -EBUSY}); return; }
    }
    if (r.fixed_index >= 0)
      io_uring_prep_read_fixed(sqe, r.fd, r.dst, unsigned(r.bytes), r.offset, r.fixed_index);
    else
      io_uring_prep_read(sqe, r.fd, r.dst, unsigned(r.bytes), r.offset);
    io_uring_sqe_set_data64(sqe, r.tag);
    pending_tags_.push_back(r.tag);
  }

  EngineCompletion wait() override {
    if (!failed_.empty()) {
      const auto c = failed_.front();
      failed_.pop_front();
      return c;
    }
    flush();
    if (!failed_.empty()) return wait();
    if (in_kernel_ == 0) return {kEngineBrokenTag, -EIO};  // nothing could be submitted
    return wait_one();
  }

  Status register_buffers(std::span<const std::span<uint8_t>> bufs) override {
    std::vector<iovec> iov;
    for (auto b : bufs) iov.push_back({b.data(), b.size()});
    if (const int e = io_uring_register_buffers(&ring_, iov.data(), unsigned(iov.size())); e < 0)
      return Status::error("io_uring_register_buffers: {}", std::strerror(-e));
    return Status::ok();
  }

 private:
  // Hands queued SQEs to the kernel. A hard failure fails every queued read (they never reach the
  // kernel, so nothing writes their buffers) and every later one.
  void flush() {
    while (!pending_tags_.empty()) {
      const int n = io_uring_submit(&ring_);
      if (n >= 0) {
        in_kernel_ += uint32_t(n);
        pending_tags_.erase(pending_tags_.begin(), pending_tags_.begin() + std::min<size_t>(n, pending_tags_.size()));
        if (n == 0) break;
        continue;
      }
      if (n == -EINTR) continue;
      if ((n == -EAGAIN || n == -EBUSY) && in_kernel_ > 0) break;  // reap first, submit later
      broken_ = -n;
      for (uint64_t t : pending_tags_) failed_.push_back({t, n});
      pending_tags_.clear();
    }
  }

  EngineCompletion wait_one() {
    io_uring_cqe* cqe = nullptr;
    int e;
    while ((e = io_uring_wait_cqe(&ring_, &cqe)) == -EINTR) {}
    if (e < 0) { broken_ = -e; return {kEngineBrokenTag, e}; }
    const EngineCompletion c{io_uring_cqe_get_data64(cqe), cqe->res};
    io_uring_cqe_seen(&ring_, cqe);
    --in_kernel_;
    return c;
  }

  uint32_t qd_;
  io_uring ring_{};
  bool ready_ = false;
  int broken_ = 0;                      // errno of a failed io_uring_submit; the ring is unusable
  uint32_t in_kernel_ = 0;              // submitted, not yet reaped
  std::vector<uint64_t> pending_tags_;  // queued SQEs not yet submitted, in order
  std::deque<EngineCompletion> failed_; // reads failed before reaching the kernel
};

}  // namespace

Result<std::unique_ptr<ReadEngine>> make_uring_engine(uint32_t queue_depth) {
  auto e = std::make_unique<UringEngine>(queue_depth);
  if (auto s = e->init(); !s) return s;
  return std::unique_ptr<ReadEngine>(std::move(e));
}

#else

Result<std::unique_ptr<ReadEngine>> make_uring_engine(uint32_t) {
  return Status::error("this build has no liburing (install liburing-dev and reconfigure)");
}

#endif

}  // namespace strata::io
