// strata serve: an OpenAI-compatible HTTP server over one model (src/server). The engine holds
// --parallel sequences and the scheduler runs them with continuous batching; SIGTERM or SIGINT
// stops taking requests, lets the ones in flight finish, and exits 0. --spec: a session that runs
// alone decodes speculatively (server/scheduler.h says when and why only then).
#include <cctype>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <semaphore.h>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_args.h"
#include "cli/placement_report.h"
#include "core/log.h"
#include "core/text_file.h"
#include "core/units.h"
#include "server/http_server.h"
#include "server/scheduler.h"
#include "session/decode.h"
#include "session/run_plan.h"
#include "session/session.h"

namespace strata::cli {
namespace {

struct ServeArgs {
  ModelArgs m;
  std::string host = "127.0.0.1";
  int port = 8080;
  uint32_t parallel = 4, queue = 64, max_tokens = 512;
  std::string max_body = "1MiB";
  std::string api_key, api_key_file, alias;
};

// SIGINT/SIGTERM: the handler only records the signal and posts a semaphore (both
// async-signal-safe); a thread waiting on it drains and stops the server, which a handler may not
// do. (Blocking the signals and sigwait() would not do: OpenBLAS starts its threads before main,
// with the signals unblocked.) SA_RESETHAND: a second signal kills at once, for a user who does
// not want to wait. Not session/interrupt.h: its flag makes the decode loops cut sessions short,
// and a drain lets them finish.
sem_t g_stop;
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  g_signal = sig;
  sem_post(&g_stop);
}

void install_stop_handlers() {
  sem_init(&g_stop, 0, 0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int run_serve(ServeArgs a) {
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a kill
  const auto limit = a.m.thread_limit();

  auto max_body = parse_bytes(a.max_body);
  if (!max_body) {
    log::error("--max-body: {}", max_body.message());
    return 2;
  }
  if (!a.api_key.empty() && !a.api_key_file.empty()) {
    log::error("give --api-key or --api-key-file, not both");
    return 2;
  }
  if (!a.api_key_file.empty()) {
    auto key = read_text_file(a.api_key_file, "API key file");
    if (!key) {
      log::error("{}", key.message());
      return 1;
    }
    a.api_key = *key;
    while (!a.api_key.empty() && std::isspace(uint8_t(a.api_key.back()))) a.api_key.pop_back();
    if (a.api_key.empty()) {
      log::error("--api-key-file {}: the file is empty", a.api_key_file);
      return 2;
    }
  }

  OpenModel om;
  if (int rc = om.open(a.m, true)) return rc;
  if (int rc = om.open_engine(0, a.parallel, a.parallel)) return rc;
  auto& s = *om.session;
  const tokenizer::Tokenizer& tok = *om.tok;
  auto& engine = s.engine();
  {  // --draft-max against this engine (its ubatch), before any request: as generate checks it
    runtime::Sampler probe({}, engine.model().spec.hp.n_vocab);
    if (auto d = session::make_decoder(engine, probe, s.spec()); !d) {
      log::error("{}", d.message());
      return 2;
    }
  }
  server::EngineInfo info{engine.n_ctx(), engine.n_seq(), engine.kv_bytes_per_seq(),
                          tokenizer::detect_chat_family(tok.chat_template()), {}};  // plan_json below
  // GET /v1/strata/plan: the placement, and what the server adds to it (its sessions).
  auto profile = profile_or_detected(a.m.profile, a.m.device != "cpu");
  nlohmann::json plan = profile ? session_plan_json(s, *profile, report_shape(s, 0, a.max_tokens))
                                : infeasible_plan_json(profile.message());
  plan["server"] = {{"sessions", info.n_seq}, {"n_ctx", info.n_ctx}, {"kv_bytes_per_session", info.kv_bytes_per_seq},
                    {"device", std::string(engine.device_name())}};
  if (const auto& e = s.executor_plan())
    plan["server"]["predicted_aggregate_decode_tps"] = e->plan.prediction.decode_tps;  // planned for its sessions
  plan["server"]["speculation"] = {{"spec", s.spec().text()}, {"when", "one session running"}};
  info.plan_json = plan.dump();

  server::ServerOptions opt;
  opt.host = a.host;
  opt.port = a.port;
  opt.api_key = a.api_key;
  opt.max_body = size_t(*max_body);
  opt.limits.max_tokens = a.max_tokens;
  opt.model_id = a.alias.empty() ? std::filesystem::path(a.m.model).stem().string() : a.alias;
  // Every session and queued request may hold a connection, plus a few for /health and /metrics.
  opt.threads = std::min<uint32_t>(a.parallel + a.queue + 4, 1024);

  server::Metrics metrics;
  server::Scheduler scheduler(engine, tok, metrics, a.queue, s.spec());
  server::HttpServer http(opt, info, tok, scheduler, metrics);
  auto port = http.bind();
  if (!port) {
    log::error("{}", port.message());
    return 1;
  }
  log::info("{} | ctx {} | {} sessions | chat template: {} | device {} | spec {} (a session running alone)",
            engine.model().spec.summary(), info.n_ctx, info.n_seq, tokenizer::chat_family_name(info.chat),
            engine.device_name(), s.spec().text());
  // Tests and scripts read the port from this line (with --port 0 the system picks it).
  std::fprintf(stderr, "strata serve: listening on http://%s:%d\n", a.host.c_str(), *port);
  std::fflush(stderr);

  install_stop_handlers();
  std::thread stopper([&] {
    while (sem_wait(&g_stop) != 0) {}  // EINTR: wait again
    const int sig = g_signal;
    if (sig == 0) return;  // serving ended without a signal
    log::info("{}: draining the requests in flight, then exiting", sig == SIGINT ? "SIGINT" : "SIGTERM");
    http.begin_drain();
    scheduler.drain();
    http.stop_after_drain();
  });
  const bool ok = http.listen();
  if (g_signal == 0) sem_post(&g_stop);  // wakes the stopper when no signal came
  stopper.join();
  if (!ok) {
    log::error("the HTTP server stopped with an error");
    return 1;
  }
  if (Status w = write_trace(s); !w) {  // --trace: the spans of the whole run
    log::error("{}", w.message());
    return 1;
  }
  log::info("stopped");
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* sub = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions (streaming with SSE, "
               "logprobs), /v1/models, /health, /metrics, /v1/strata/plan; continuous batching over --parallel "
               "sessions");
  a->m.add_to(sub);
  a->m.add_spec_to(sub);
  sub->add_option("--host", a->host, "Address to listen on (loopback by default; 0.0.0.0 exposes the server)")
      ->capture_default_str();
  sub->add_option("--port", a->port, "TCP port (0: any free port, printed on stderr)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  sub->add_option("--parallel", a->parallel, "Sessions generating at once (engine sequences, each with its own KV "
                                             "cache of -c tokens)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  sub->add_option("--queue", a->queue, "Requests that may wait for a session; more get 429 with Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  sub->add_option("--max-body", a->max_body, "Largest request body (e.g. 1MiB); larger ones get 413")
      ->capture_default_str();
  sub->add_option("--max-tokens", a->max_tokens, "Tokens a request generates when it sets no max_tokens, and the "
                                                 "most it may ask for (more is a 400)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  sub->add_option("--api-key", a->api_key, "Require 'Authorization: Bearer KEY' on every route but /health "
                                           "(visible in ps: prefer --api-key-file)");
  sub->add_option("--api-key-file", a->api_key_file, "Read the API key from this file (trailing whitespace ignored)");
  sub->add_option("--alias", a->alias, "Model id in /v1/models and responses (default: the file name without .gguf)");
  return {sub, [a] { return run_serve(*a); }};
}

}  // namespace strata::cli
