#include "server/http_server.h"

#include <chrono>

#include <fmt/format.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/completion_handler.h"

namespace strata::server {
namespace {

// Compares without an early exit, so the time a wrong key takes says nothing about the right one
// (its length is not the secret).
bool same_key(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

class HttpServer::Handlers {
 public:
  Handlers(const ServerOptions& opt, const EngineInfo& info, const tokenizer::Tokenizer& tok, Scheduler& scheduler,
           Metrics& metrics)
      : completion(tok, info.chat, info.n_ctx, opt.limits, opt.model_id, scheduler, metrics) {}
  CompletionHandler completion;
};

HttpServer::HttpServer(ServerOptions opt, EngineInfo info, const tokenizer::Tokenizer& tok, Scheduler& scheduler,
                       Metrics& metrics)
    : opt_(std::move(opt)), info_(info), svr_(std::make_unique<httplib::Server>()),
      handlers_(std::make_unique<Handlers>(opt_, info_, tok, scheduler, metrics)) {
  auto& svr = *svr_;
  const uint32_t threads = opt_.threads;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr.set_payload_max_length(opt_.max_body);  // larger bodies: 413 before they are read
  svr.set_read_timeout(30);                   // a client that stops sending mid-request is dropped
  svr.set_write_timeout(30);

  // The key is checked before routing; /health stays open for load balancers and probes.
  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string_view prefix = "Bearer ";
    if (auth.empty()) {
      reply_error(res, {401, "missing API key: send 'Authorization: Bearer KEY'", "invalid_request_error", {},
                        "invalid_api_key"});
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!auth.starts_with(prefix) || !same_key(std::string_view(auth).substr(prefix.size()), opt_.api_key)) {
      reply_error(res, {401, "incorrect API key", "invalid_request_error", {}, "invalid_api_key"});
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors httplib answers itself (unknown route, body too large, malformed HTTP) get an OpenAI
  // body too; the handlers' own errors already have one.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e{res.status, "", "invalid_request_error", {}, {}};
    if (res.status == 404) e.message = "unknown route: " + req.method + " " + req.path;
    else if (res.status == 413) e.message = "the request body is larger than the server's --max-body";
    else e.message = fmt::format("HTTP error {}", res.status);
    reply_error(res, e);
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    reply_error(res, {500, what, "server_error", {}, {}});
  });

  auto& completion = handlers_->completion;
  svr.Post("/v1/completions", [&completion](const httplib::Request& req, httplib::Response& res) {
    completion.handle(req, res, Endpoint::completions);
  });
  svr.Post("/v1/chat/completions", [&completion](const httplib::Request& req, httplib::Response& res) {
    completion.handle(req, res, Endpoint::chat);
  });
  svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json m = {{"id", opt_.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "strata"},
                        {"context_length", info_.n_ctx}};
    res.set_content(nlohmann::json{{"object", "list"}, {"data", {m}}}.dump(), "application/json");
  });
  svr.Get("/v1/strata/plan", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(info_.plan_json, "application/json");
  });
  svr.Get("/health", [&completion](const httplib::Request&, httplib::Response& res) {
    const bool draining = completion.draining();
    res.status = draining ? 503 : 200;
    res.set_content(nlohmann::json{{"status", draining ? "draining" : "ok"}}.dump(), "application/json");
  });
  svr.Get("/metrics", [this, &metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.prometheus(info_.kv_bytes_per_seq, info_.n_seq), "text/plain; version=0.0.4");
  });
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() {
  const int port = opt_.port == 0 ? svr_->bind_to_any_port(opt_.host) : (svr_->bind_to_port(opt_.host, opt_.port)
                                                                            ? opt_.port
                                                                            : -1);
  if (port <= 0) return Status::error("cannot listen on {}:{} (address in use or not local?)", opt_.host, opt_.port);
  return port;
}

bool HttpServer::listen() { return svr_->listen_after_bind(); }

void HttpServer::begin_drain() { handlers_->completion.begin_drain(); }

void HttpServer::stop_after_drain() {
  handlers_->completion.wait_idle();
  svr_->stop();
}

}  // namespace strata::server
