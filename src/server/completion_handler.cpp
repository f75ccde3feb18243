#include "server/completion_handler.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include <fmt/format.h>
#include <httplib.h>

#include "server/response.h"
#include "session/prompt.h"

namespace strata::server {

using namespace std::chrono_literals;

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body(), "application/json");
}

struct CompletionHandler::Open {
  explicit Open(CompletionHandler& h) : h(h) {}
  ~Open() {
    std::lock_guard lock(h.mu_);
    if (--h.open_ == 0) h.idle_.notify_all();
  }
  CompletionHandler& h;
};

std::shared_ptr<CompletionHandler::Open> CompletionHandler::open_response() {
  std::lock_guard lock(mu_);
  ++open_;
  return std::make_shared<Open>(*this);
}

void CompletionHandler::wait_idle() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return open_ == 0; });
}

void CompletionHandler::handle(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  ++metrics_.requests;
  auto reject = [&](const ApiError& e) {
    ++metrics_.rejected_invalid;
    reply_error(res, e);
  };
  if (draining_) return reply_error(res, {503, "the server is shutting down", "server_error", {}, {}});
  CompletionRequest r;
  if (auto e = parse_request(req.body, endpoint, limits_, r)) return reject(*e);
  // Tokenized as `strata generate` does (session/prompt.h), so greedy output matches it.
  const std::vector<int32_t> prompt = endpoint == Endpoint::chat
                                          ? session::encode_chat(tok_, r.messages, chat_)
                                          : session::encode_prompt(tok_, r.prompt, tokenizer::ChatFamily::none);
  const char* param = endpoint == Endpoint::chat ? "messages" : "prompt";
  if (prompt.empty()) return reject(bad_request("the prompt encodes to no tokens", param));
  if (prompt.size() >= n_ctx_)
    return reject({400,
                   fmt::format("the prompt has {} tokens; the context holds {} (server -c)", prompt.size(), n_ctx_),
                   "invalid_request_error", param, "context_length_exceeded"});
  if (r.model.empty()) r.model = model_id_;

  auto ticket = std::make_shared<Ticket>();
  auto open = open_response();  // before submit: the drain must wait for this response
  switch (scheduler_.submit({prompt, r.max_tokens, r.sp, r.stop, r.logprobs, ticket})) {
    case Admit::ok: break;
    case Admit::queue_full:
      ++metrics_.rejected_full;
      res.set_header("Retry-After", "1");
      return reply_error(res, {429, "the request queue is full; retry later", "rate_limit_error", {},
                               "queue_full"});
    case Admit::draining: return reply_error(res, {503, "the server is shutting down", "server_error", {}, {}});
  }
  if (r.stream)
    respond_stream(res, r, std::move(ticket), std::move(open));
  else
    respond_whole(res, r, std::move(ticket), std::move(open));
}

void CompletionHandler::respond_whole(httplib::Response& res, const CompletionRequest& r, std::shared_ptr<Ticket> t,
                                      std::shared_ptr<Open> open) {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  Update u;
  do {
    u = t->wait(1000ms);
    text += u.text;
    std::move(u.logprobs.begin(), u.logprobs.end(), std::back_inserter(logprobs));
  } while (!u.done);
  if (!u.error.empty()) return reply_error(res, {500, u.error, "server_error", {}, {}});
  res.set_content(Response(r.endpoint, r.model, r.logprobs >= 0).complete(text, logprobs, u.finish_reason, u.usage),
                  "application/json");
}

void CompletionHandler::respond_stream(httplib::Response& res, const CompletionRequest& r, std::shared_ptr<Ticket> t,
                                       std::shared_ptr<Open> open) {
  auto out = std::make_shared<Response>(r.endpoint, r.model, r.logprobs >= 0);
  const bool include_usage = r.include_usage;
  res.set_header("Cache-Control", "no-cache");
  // httplib calls the provider again and again until it calls sink.done() or returns false; each
  // call waits a little for text, so an idle stream does not spin.
  res.set_chunked_content_provider(
      "text/event-stream",
      [t, out, include_usage](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& s) {
          if (sink.write(s.data(), s.size())) return true;
          t->cancel();  // the client is gone: the scheduler drops the session and frees its KV
          return false;
        };
        const Update u = t->wait(200ms);
        if ((!u.text.empty() || !u.logprobs.empty()) && !send(out->chunk(u.text, u.logprobs))) return false;
        if (!u.done) return true;
        if (!u.error.empty()) {
          if (!send(Response::error_event(u.error))) return false;
        } else {
          if (!send(out->final_chunk(u.finish_reason))) return false;
          if (include_usage && !send(out->usage_chunk(u.usage))) return false;
        }
        if (!send(Response::done())) return false;
        sink.done();
        return true;
      },
      // Called when the response is done with, written or not: an unfinished one was abandoned.
      [t, open](bool success) {
        if (!success) t->cancel();
      });
}

}  // namespace strata::server
