#include "io/fault_engine.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "core/rng.h"

namespace strata::io {
namespace {

class FaultEngine final : public ReadEngine {
 public:
  FaultEngine(std::unique_ptr<ReadEngine> inner, FaultPlan plan)
      : inner_(std::move(inner)), plan_(plan), rng_(plan.seed) {}
  std::string name() const override { return inner_->name() + " (fault injection)"; }
  uint32_t queue_depth() const override { return inner_->queue_depth(); }
  Status register_buffers(std::span<const std::span<uint8_t>> bufs) override { return inner_->register_buffers(bufs); }

  void submit(const EngineRead& r) override {
    reads_[r.tag] = r;
    inner_->submit(r);
  }

  EngineCompletion wait() override {
    EngineCompletion c = inner_->wait();
    const auto it = reads_.find(c.tag);
    if (it == reads_.end()) return c;
    const EngineRead r = it->second;
    reads_.erase(it);
    using K = FaultPlan::Kind;
    switch (plan_.kind) {
      case K::none: break;
      case K::eio:
        if (r.offset + r.bytes > plan_.at_offset) {
          std::memset(r.dst, 0xEE, r.bytes);  // a failed read may leave anything in the buffer
          c.result = -EIO;
        }
        break;
      case K::short_reads:
        // As the kernel does: O_DIRECT reads come short by whole pages, buffered ones by any count.
        if (direct(r.fd)) {
          const uint64_t pages = c.result > 0 ? uint64_t(c.result - 1) / 4096 : 0;
          if (pages > 0) c.result = int64_t(4096 * (1 + rng_.next_u64() % pages));
        } else if (c.result > 1) {
          c.result = 1 + int64_t(rng_.next_u64() % uint64_t(c.result - 1));
        }
        break;
      case K::eagain_storm:
        if (eagains_ < plan_.count) { ++eagains_; c.result = -EAGAIN; }
        break;
      case K::no_direct:
        if (direct(r.fd)) c.result = -EINVAL;
        break;
      case K::slow:
        std::this_thread::sleep_for(std::chrono::milliseconds(plan_.delay_ms));
        break;
      case K::truncated:
        if (c.result > 0 && r.offset + uint64_t(c.result) > plan_.at_offset)
          c.result = r.offset >= plan_.at_offset ? 0 : int64_t(plan_.at_offset - r.offset);
        break;
    }
    // What a short read did not deliver is not in the buffer: poison it, so that a reader that
    // takes a short read for a whole one hands on visibly wrong bytes.
    if (c.result >= 0 && uint64_t(c.result) < r.bytes) std::memset(r.dst + c.result, 0xEE, r.bytes - uint64_t(c.result));
    return c;
  }

 private:
  static bool direct(int fd) { return (::fcntl(fd, F_GETFL) & O_DIRECT) != 0; }

  std::unique_ptr<ReadEngine> inner_;
  FaultPlan plan_;
  Rng rng_;
  uint32_t eagains_ = 0;
  std::unordered_map<uint64_t, EngineRead> reads_;
};

}  // namespace

std::unique_ptr<ReadEngine> make_fault_engine(std::unique_ptr<ReadEngine> inner, FaultPlan plan) {
  return std::make_unique<FaultEngine>(std::move(inner), plan);
}

}  // namespace strata::io
