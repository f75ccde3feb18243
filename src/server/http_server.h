// The HTTP front end (cpp-httplib): routes, the API key, body limits, OpenAI error bodies, and
// streaming with server-sent events. It tokenizes requests (the tokenizer is thread-safe) and
// hands them to the Scheduler; each connection is served by one thread of a pool sized for every
// session and queued request, so a waiting stream never blocks another.
//
//   POST /v1/completions, /v1/chat/completions   GET /v1/models, /health, /metrics, /v1/strata/plan
//
// Lifetime: bind(), then listen() blocks until stop_after_drain() (from another thread) has
// stopped it. The Scheduler and everything passed in outlive this object.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace strata::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;         // 0: any free port (bind() says which)
  std::string api_key;     // empty: no key required
  size_t max_body = 1 << 20;
  RequestLimits limits;
  std::string model_id;    // what /v1/models lists and responses name
  uint32_t threads = 16;   // connection threads
};

// What the front end needs to know about the engine.
struct EngineInfo {
  uint32_t n_ctx = 0, n_seq = 0;
  uint64_t kv_bytes_per_seq = 0;
  tokenizer::ChatFamily chat = tokenizer::ChatFamily::none;
  std::string plan_json;  // GET /v1/strata/plan's body: the placement (cli/placement_report.h)
};

class HttpServer {
 public:
  HttpServer(ServerOptions opt, EngineInfo info, const tokenizer::Tokenizer& tok, Scheduler& scheduler,
             Metrics& metrics);
  ~HttpServer();

  // Binds the listening socket; returns the port. Error: the address is taken or invalid.
  Result<int> bind();
  // Serves until stopped. False when the server failed (not when stopped).
  bool listen();
  // New completion requests get 503 from now on (in-flight ones continue).
  void begin_drain();
  // Waits until every response that was being generated has been written, then stops listen().
  void stop_after_drain();

 private:
  class Handlers;
  ServerOptions opt_;
  EngineInfo info_;
  std::unique_ptr<httplib::Server> svr_;
  std::unique_ptr<Handlers> handlers_;
};

}  // namespace strata::server
