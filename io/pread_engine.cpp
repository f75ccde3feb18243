// pread(2) thread pool: the fallback where io_uring is refused, and the buffered path where the
// filesystem refuses O_DIRECT. Each worker blocks in one pread at a time, so `threads` is the
// queue depth the device sees.
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "io/read_engine.h"

namespace strata::io {
namespace {

class PreadEngine final : public ReadEngine {
 public:
  explicit PreadEngine(uint32_t threads) : n_(threads) {
    for (uint32_t i = 0; i < n_; ++i) workers_.emplace_back([this] { work(); });
  }
  ~PreadEngine() override {
    {
      std::lock_guard lk(mu_);
      stop_ = true;  // workers finish the reads already queued, so no buffer is written after this
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  std::string name() const override { return "pread pool"; }
  uint32_t queue_depth() const override { return n_; }

  void submit(const EngineRead& r) override {
    {
      std::lock_guard lk(mu_);
      queue_.push_back(r);
    }
    work_cv_.notify_one();
  }

  EngineCompletion wait() override {
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return !done_.empty(); });
    const auto c = done_.front();
    done_.pop_front();
    return c;
  }

 private:
  void work() {
    for (;;) {
      EngineRead r;
      {
        std::unique_lock lk(mu_);
        work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        r = queue_.front();
        queue_.pop_front();
      }
      ssize_t n;
      do n = ::pread(r.fd, r.dst, r.bytes, off_t(r.offset)); while (n < 0 && errno == EINTR);
      const EngineCompletion c{r.tag, n < 0 ? -int64_t(errno) : int64_t(n)};
      {
        std::lock_guard lk(mu_);
        done_.push_back(c);
      }
      done_cv_.notify_one();
    }
  }

  uint32_t n_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<EngineRead> queue_;
  std::deque<EngineCompletion> done_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

std::unique_ptr<ReadEngine> make_pread_engine(uint32_t threads) {
  return std::make_unique<PreadEngine>(threads == 0 ? 1 : threads);
}

}  // namespace strata::io
