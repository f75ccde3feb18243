// One request's channel between the HTTP thread that answers it and the scheduler thread that
// generates it. The scheduler appends text and finally finishes (or fails) the ticket; the HTTP
// thread waits for updates and may cancel (its client went away). Thread-safe; shared by both
// sides through a shared_ptr, so whichever lets go last frees it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "server/logprobs.h"

namespace strata::server {

struct Usage {
  uint32_t prompt_tokens = 0, completion_tokens = 0;
};

// What a wait() returns: the text appended since the last update (with the log-probabilities of
// its tokens, when the request asked for them), and the end when it came.
struct Update {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  bool done = false;
  std::string finish_reason;  // with done: "stop" (end of text or a stop string) | "length"
  std::string error;          // with done: the engine failed (finish_reason empty)
  Usage usage;
};

class Ticket {
 public:
  // ---- scheduler side ----
  void append(const std::string& text, std::vector<TokenLogprob> logprobs = {});
  void finish(std::string finish_reason, Usage usage);
  void fail(std::string error);
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // ---- HTTP side ----
  // Waits up to `timeout` for new text (or logprobs) or the end; returns it (nothing new, done
  // false: nothing yet).
  Update wait(std::chrono::milliseconds timeout);
  // The client is gone: the scheduler drops the session at its next step and frees its KV.
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Update pending_;  // guarded by mu_
  std::atomic<bool> cancelled_{false};
};

}  // namespace strata::server
