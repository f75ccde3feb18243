// POST /v1/completions and /v1/chat/completions: parse the request, tokenize it as `strata
// generate` would (plain text with BOS, or the model's chat template with the user's text never
// parsed for control tokens), queue it, and answer it whole or as a stream of server-sent events.
// A streamed response whose client has gone (a chunk cannot be written) cancels its session.
//
// Drain: begin_drain() makes new requests 503; wait_idle() returns once every response this
// handler started has been written or abandoned. Thread-safe: one object serves every connection.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "server/api_error.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace strata::server {

// Writes `e` as the response (status, JSON body).
void reply_error(httplib::Response& res, const ApiError& e);

class CompletionHandler {
 public:
  CompletionHandler(const tokenizer::Tokenizer& tok, tokenizer::ChatFamily chat, uint32_t n_ctx,
                    const RequestLimits& limits, std::string model_id, Scheduler& scheduler, Metrics& metrics)
      : tok_(tok), chat_(chat), n_ctx_(n_ctx), limits_(limits), model_id_(std::move(model_id)),
        scheduler_(scheduler), metrics_(metrics) {}

  void handle(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void begin_drain() { draining_ = true; }
  bool draining() const { return draining_; }
  void wait_idle();

 private:
  // Counts responses in progress (for the drain); released when the response is done with.
  struct Open;
  std::shared_ptr<Open> open_response();
  void respond_whole(httplib::Response& res, const CompletionRequest& r, std::shared_ptr<Ticket> t,
                     std::shared_ptr<Open> open);
  void respond_stream(httplib::Response& res, const CompletionRequest& r, std::shared_ptr<Ticket> t,
                      std::shared_ptr<Open> open);

  const tokenizer::Tokenizer& tok_;
  const tokenizer::ChatFamily chat_;
  const uint32_t n_ctx_;
  const RequestLimits limits_;
  const std::string model_id_;
  Scheduler& scheduler_;
  Metrics& metrics_;
  std::atomic<bool> draining_{false};
  std::mutex mu_;
  std::condition_variable idle_;
  uint32_t open_ = 0;  // guarded by mu_
};

}  // namespace strata::server
