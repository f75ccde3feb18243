// Counters the scheduler and the HTTP front end update, and their Prometheus text (GET /metrics).
// Counters are atomics: updated from any thread, read without locks (a scrape may see one counter
// a step ahead of another, as Prometheus allows).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace strata::server {

struct Metrics {
  std::atomic<uint64_t> requests{0};           // completion requests received (any outcome)
  std::atomic<uint64_t> rejected_full{0};      // 429: the queue was full
  std::atomic<uint64_t> rejected_invalid{0};   // 4xx before queueing: bad JSON, types, size, auth
  std::atomic<uint64_t> completed{0};          // sessions that finished (stop or length)
  std::atomic<uint64_t> cancelled{0};          // sessions dropped because their client went away
  std::atomic<uint64_t> failed{0};             // sessions the engine failed
  std::atomic<uint64_t> prompt_tokens{0}, generated_tokens{0};
  std::atomic<uint64_t> prefill_us{0}, decode_us{0};  // engine time spent in prefill and in decode steps
  // --spec, a session running alone: speculative rounds, the tokens they generated, and the draft
  // tokens proposed and accepted in them.
  std::atomic<uint64_t> spec_rounds{0}, spec_tokens{0}, spec_drafted{0}, spec_accepted{0};
  std::atomic<uint32_t> queued{0}, running{0};       // gauges, set by the scheduler

  // The exposition text; kv_bytes_per_session and sessions describe the engine.
  std::string prometheus(uint64_t kv_bytes_per_session, uint32_t sessions) const;
};

}  // namespace strata::server
