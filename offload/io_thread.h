// IoThread: one worker thread that runs host I/O jobs (the disk tier's block reads) in the order
// they were posted, each handing its result back through a std::future (the task model of
// kvikio, with one queue). The thread that enqueues GPU work posts a read as early as the
// schedule allows and takes the result only when the data is needed, so it blocks on a read only
// when that read is late.
//
// Contract: jobs run one at a time, first posted first run, so two jobs that write the same buffer
// never overlap. A job must not throw (it returns a Status inside its result) and must not call
// CUDA (fault injection counts CUDA calls; keeping them on the enqueuing thread keeps that count
// deterministic). The destructor runs the jobs still queued, then joins. post() is thread-safe;
// the futures are single-consumer.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

namespace strata::offload {

class IoThread {
 public:
  IoThread() : worker_([this] { run(); }) {}
  ~IoThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    worker_.join();
  }
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  template <class F>
  auto post(F job) -> std::future<decltype(job())> {
    using R = decltype(job());
    // std::function needs a copyable callable: the task lives behind a shared_ptr.
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(job));
    std::future<R> done = task->get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.emplace_back([task] { (*task)(); });
    }
    cv_.notify_one();
    return done;
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_, and nothing left to run
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread worker_;  // last: starts after the queue exists
};

}  // namespace strata::offload
