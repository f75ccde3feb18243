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
// Speculation (--spec): while exactly one session runs, its steps are rounds of the speculative
// decoder (spec/speculative_decoder.h, the step `strata generate --spec` runs): draft, verify in
// one pass, keep the accepted tokens, roll the KV of the rejected ones back; each round yields
// one or more tokens. With two or more sessions the steps stay batched: a batched step already
// serves every session with one sweep over the weights, which is what a verify pass buys one
// session. A session moves between the two as others join and leave; both are exact (greedy
// output equals plain decoding, sampled output follows the sampler's distribution), so its text
// does not depend on the switch. The decoder works on the session's sequence through
// session::SequenceView: prompt lookup runs on any sequence, early exit, layer subset and auto
// only on sequence 0 (the engine runs partial layer ranges there only); a lone session on
// another sequence with those takes plain steps. Requests take the lowest free sequence, so a
// session that runs alone mostly is on sequence 0.
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
#include "spec/spec_config.h"
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
  // spec: the speculation of a session that runs alone (mode none: never).
  Scheduler(runtime::Engine& engine, const tokenizer::Tokenizer& tok, Metrics& metrics, uint32_t queue_limit,
            spec::SpecConfig spec = {});
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
  // A round of the speculative decoder for the one running session; false: it cannot speculate
  // on its sequence (the caller takes a plain step).
  bool spec_step(Slot& s, uint32_t seq, session::JobRunner& runner);
  // raw_logits: one row of n_vocab per token generated since the last call, in order (with
  // logprobs asked for; else may be empty).
  void after_token(Slot& s, uint32_t seq, std::span<const float> raw_logits);
  void finish(Slot& s, uint32_t seq, const char* reason);
  void release(Slot& s, uint32_t seq);

  runtime::Engine& engine_;
  const tokenizer::Tokenizer& tok_;
  Metrics& metrics_;
  const uint32_t queue_limit_;
  const spec::SpecConfig spec_;
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
