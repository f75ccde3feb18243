// The scheduler: one thread that owns the engine and runs continuous batching over its
// sequences (--parallel). Requests wait in a bounded queue; between two steps every free sequence
// takes the next request and prefills its prompt alone, then every running session decodes one
// token per step through Engine::eval_batch (one sweep over the weights serves them all). A session
// leaves the batch when it ends (end of text, a stop string, max_tokens, a full context) or when
// its client cancels; its sequence is truncated to 0 (the KV forgotten) and taken by the next
// request. The per-token decision is session::JobRunner::next_token, the one `strata batch
// --batch N` uses, and every session has its own sampler and seed, so a request's tokens do not
// depend on what else runs beside it (greedy output equals `strata generate`).
//
// Thread-safety: submit(), queued() and drain() may be called from any thread; the engine and the
// tokenizer are used only by the scheduler thread once it started.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "server/metrics.h"
#include "server/ticket.h"
#include "tokenizer/tokenizer.h"

namespace strata::session {
class JobRunner;
}

namespace strata::server {

struct Job {
  std::vector<int32_t> prompt;  // token ids, BOS and chat template included
  uint32_t max_tokens = 0;
  runtime::SamplerParams sp;
  std::vector<std::string> stop;
  int32_t logprobs = -1;  // CompletionRequest::logprobs: -1 none, else top alternatives per token
  std::shared_ptr<Ticket> ticket;
};

enum class Admit { ok, queue_full, draining };

class Scheduler {
 public:
  // Starts the thread. queue_limit: requests that may wait when every sequence is busy (0: a
  // request is taken only when a sequence is free for it).
  Scheduler(runtime::Engine& engine, const tokenizer::Tokenizer& tok, Metrics& metrics, uint32_t queue_limit);
  ~Scheduler();  // drains
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  Admit submit(Job job);
  // Accepts no more requests, lets every queued and running one finish, and joins the thread.
  void drain();

 private:
  struct Slot;
  void loop();
  void start(Slot& s, uint32_t seq, session::JobRunner& runner);
  // The session's next token from its latest logits (next_token), its logprobs when asked for,
  // and what follows from it (after_token).
  void step(Slot& s, uint32_t seq, session::JobRunner& runner);
  void after_token(Slot& s, uint32_t seq, std::span<const float> raw_logits);
  void finish(Slot& s, uint32_t seq, const char* reason);
  void release(Slot& s, uint32_t seq);

  runtime::Engine& engine_;
  const tokenizer::Tokenizer& tok_;
  Metrics& metrics_;
  const uint32_t queue_limit_;
  std::vector<Slot> slots_;  // one per engine sequence; scheduler thread only
  std::vector<float> raw_logits_;  // step(): the logits before the sampler; scheduler thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;  // guarded by mu_
  bool draining_ = false;  // guarded by mu_
  uint32_t busy_ = 0;      // sequences holding a request; guarded by mu_
  std::thread thread_;
};

}  // namespace strata::server
