#include "server/metrics.h"

#include <fmt/format.h>

namespace strata::server {
namespace {

void add(std::string& out, const char* name, const char* type, const char* help, double value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
}

}  // namespace

std::string Metrics::prometheus(uint64_t kv_bytes_per_session, uint32_t sessions) const {
  std::string o;
  const double prefill_s = double(prefill_us.load()) / 1e6, decode_s = double(decode_us.load()) / 1e6;
  const double pt = double(prompt_tokens.load()), gt = double(generated_tokens.load());
  add(o, "strata_requests_total", "counter", "Completion requests received", double(requests.load()));
  add(o, "strata_requests_rejected_queue_full_total", "counter", "Requests answered 429 (queue full)",
      double(rejected_full.load()));
  add(o, "strata_requests_rejected_invalid_total", "counter", "Requests rejected before queueing (4xx)",
      double(rejected_invalid.load()));
  add(o, "strata_sessions_completed_total", "counter", "Sessions that finished", double(completed.load()));
  add(o, "strata_sessions_cancelled_total", "counter", "Sessions dropped when their client disconnected",
      double(cancelled.load()));
  add(o, "strata_sessions_failed_total", "counter", "Sessions the engine failed", double(failed.load()));
  add(o, "strata_queue_length", "gauge", "Requests waiting for a session", double(queued.load()));
  add(o, "strata_running_sessions", "gauge", "Sessions generating now", double(running.load()));
  add(o, "strata_session_slots", "gauge", "Sessions the engine holds (--parallel)", double(sessions));
  add(o, "strata_kv_bytes", "gauge", "KV cache bytes allocated (all sessions)",
      double(kv_bytes_per_session) * double(sessions));
  add(o, "strata_prompt_tokens_total", "counter", "Prompt tokens evaluated (prefill)", pt);
  add(o, "strata_generated_tokens_total", "counter", "Tokens generated", gt);
  add(o, "strata_prefill_seconds_total", "counter", "Engine seconds in prefill", prefill_s);
  add(o, "strata_decode_seconds_total", "counter", "Engine seconds in batched decode steps", decode_s);
  add(o, "strata_prefill_tokens_per_second", "gauge", "Prompt tokens per prefill second, since start",
      prefill_s > 0 ? pt / prefill_s : 0.0);
  add(o, "strata_decode_tokens_per_second", "gauge", "Generated tokens per decode second (all sessions), since start",
      decode_s > 0 ? gt / decode_s : 0.0);
  return o;
}

}  // namespace strata::server
