// strata serve --spec on the CPU with the embedded model: a session running alone decodes with the
// speculative decoder (rounds of draft and verify), sessions running together take batched steps,
// and a session moves between the two as others come and go. Every greedy text equals
// `strata generate` for the same prompt (with and without --spec), streamed or not; max_tokens
// holds exactly and a stop string inside an accepted run cuts the text there; logprobs are those
// of plain decoding; /metrics counts drafted and accepted tokens.
#include <catch2/catch.hpp>

#include <atomic>
#include <regex>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "serve_process.h"

namespace strata::test {
namespace {

using nlohmann::json;

const std::string kModel = std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny-q4_k.gguf";
// Repetitive: prompt lookup finds its continuations, so drafts get accepted.
const std::string kRepeat = "one two three four five, one two three four five, one two three four five, one two";
const std::string kOther = "The old lighthouse keeper";

// What `strata generate --temp 0` prints, its trailing newline removed.
std::string generate(const std::string& prompt, int n, const std::string& spec = "none") {
  const CliRun r = run_strata("generate -m " + kModel + " --device cpu -q --temp 0 -n " + std::to_string(n) +
                              " --spec " + spec + " -p '" + prompt + "'");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.out.ends_with("\n"));
  return r.out.substr(0, r.out.size() - 1);
}

double metric(httplib::Client& c, const std::string& name) {
  auto r = c.Get("/metrics");
  REQUIRE(r);
  std::smatch m;
  const std::string text = "\n" + r->body;
  if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+-]+)"))) return -1;
  return std::stod(m[1]);
}

struct Completion {
  std::string text, finish_reason;
  int completion_tokens = -1;  // not streamed only
  json logprobs;
};

// A greedy completion; streamed: the SSE chunks' text joined.
Completion complete(int port, const std::string& prompt, int max_tokens, bool stream, json extra = json::object()) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120);
  json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}};
  body.update(extra);
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 200);
  Completion out;
  if (!stream) {
    const json j = json::parse(r->body);
    out.text = j["choices"][0]["text"];
    out.finish_reason = j["choices"][0]["finish_reason"];
    out.completion_tokens = j["usage"]["completion_tokens"];
    out.logprobs = j["choices"][0]["logprobs"];
    return out;
  }
  REQUIRE(r->body.ends_with("data: [DONE]\n\n"));
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("data: {")) continue;
    const json j = json::parse(line.substr(6));
    out.text += j["choices"][0]["text"].get<std::string>();
    if (j["choices"][0]["finish_reason"].is_string()) out.finish_reason = j["choices"][0]["finish_reason"];
  }
  return out;
}

}  // namespace

TEST_CASE("serve --spec: a lone session decodes speculatively, its greedy text equals generate", "[serve][spec]") {
  const int n = 40;
  const std::string want = generate(kRepeat, n);
  const std::string want_other = generate(kOther, n);
  for (const std::string spec : {"lookup", "early:d=1", "early:d=1,tree=2", "shadow", "auto"}) {
    INFO("--spec " << spec);
    CHECK(generate(kRepeat, n, spec) == want);  // the reference: speculation does not change greedy text
    ServeProcess s({"-m", kModel, "--device", "cpu", "-c", "512", "--parallel", "2", "--spec", spec});
    httplib::Client c("127.0.0.1", s.port());
    CHECK(complete(s.port(), kRepeat, n, false).text == want);
    CHECK(complete(s.port(), kRepeat, n, true).text == want);
    CHECK(complete(s.port(), kOther, n, true).text == want_other);
    CHECK(metric(c, "strata_spec_rounds_total") > 0);
    CHECK(metric(c, "strata_spec_tokens_total") > metric(c, "strata_spec_rounds_total"));  // > 1 token a round
    if (spec == "lookup") CHECK(metric(c, "strata_spec_accepted_tokens_total") > 0);
    // Sampled: the request's seed decides the text (the decoder draws with its own generator, seeded
    // from the request's, besides the session's sampler). Not under auto: its rounds follow measured
    // step times, and which tokens were drafted changes what the generators draw (the distribution
    // stays the sampler's), as with `strata generate --spec auto`.
    const json sampled = {{"temperature", 0.9}, {"seed", 11}};
    if (spec != "auto")
      CHECK(complete(s.port(), kRepeat, n, false, sampled).text == complete(s.port(), kRepeat, n, true, sampled).text);
    CHECK(metric(c, "strata_spec_accepted_tokens_total") <= metric(c, "strata_spec_drafted_tokens_total"));
    INFO(s.stderr_text());
    CHECK(s.stop() == 0);
  }
}

TEST_CASE("serve --spec: sessions together take batched steps, a session moving between the modes stays exact",
          "[serve][spec]") {
  const int n_long = 120, n_short = 16;
  const std::string want_long = generate(kRepeat, n_long), want_short = generate(kOther, n_short);
  ServeProcess s({"-m", kModel, "--device", "cpu", "-c", "512", "--parallel", "3", "--spec", "lookup"});
  httplib::Client c("127.0.0.1", s.port());
  // Two at once: batched steps.
  {
    Completion a, b;
    std::thread ta([&] { a = complete(s.port(), kRepeat, n_long, false); });
    std::thread tb([&] { b = complete(s.port(), kOther, n_short, true); });
    ta.join();
    tb.join();
    CHECK(a.text == want_long);
    CHECK(b.text == want_short);
  }
  // One alone (speculative rounds), then company (batched steps), then alone again (rounds).
  int switched = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const double rounds0 = metric(c, "strata_spec_rounds_total");
    const double spec0 = metric(c, "strata_spec_tokens_total"), gen0 = metric(c, "strata_generated_tokens_total");
    Completion a;
    std::thread ta([&] { a = complete(s.port(), kRepeat, n_long, true); });
    for (int i = 0; i < 2000 && metric(c, "strata_spec_rounds_total") == rounds0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const bool alone_first = metric(c, "strata_spec_rounds_total") > rounds0;
    const Completion b = complete(s.port(), kOther, n_short, false);
    const double rounds_b = metric(c, "strata_spec_rounds_total");
    ta.join();
    CHECK(a.text == want_long);
    CHECK(b.text == want_short);
    // Tokens outside speculative rounds: each request's first (from its prefill) and batched steps.
    const double batched = (metric(c, "strata_generated_tokens_total") - gen0) -
                           (metric(c, "strata_spec_tokens_total") - spec0) - 2;
    const bool alone_after = metric(c, "strata_spec_rounds_total") > rounds_b;
    INFO("trial " << trial << ": alone first " << alone_first << ", batched tokens " << batched << ", alone after "
                  << alone_after);
    if (alone_first && batched > 0 && alone_after) ++switched;
  }
  CHECK(switched > 0);  // at least one trial moved the long session both ways
  // A short request takes sequence 0, a long one sequence 1 and then runs alone there: prompt
  // lookup verifies through eval_batch on its own sequence.
  {
    const double running0 = metric(c, "strata_running_sessions");
    REQUIRE(running0 == 0);
    Completion a, b;
    std::thread ta([&] { a = complete(s.port(), kOther, n_short, false); });
    for (int i = 0; i < 2000 && metric(c, "strata_running_sessions") == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread tb([&] { b = complete(s.port(), kRepeat, n_long, true); });
    ta.join();
    const double rounds_a = metric(c, "strata_spec_rounds_total");
    tb.join();
    CHECK(a.text == want_short);
    CHECK(b.text == want_long);
    CHECK(metric(c, "strata_spec_rounds_total") > rounds_a);
  }
  CHECK(metric(c, "strata_running_sessions") == 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("serve --spec: max_tokens holds exactly, a stop string inside an accepted run cuts the text",
          "[serve][spec]") {
  ServeProcess s({"-m", kModel, "--device", "cpu", "-c", "512", "--parallel", "2", "--spec", "lookup",
                  "--draft-max", "8"});
  const std::string want = generate(kRepeat, 40);
  for (int n : {1, 2, 3, 5, 9, 17}) {
    INFO("max_tokens " << n);
    const Completion r = complete(s.port(), kRepeat, n, false);
    CHECK(r.text == generate(kRepeat, n));
    if (r.finish_reason == "length") CHECK(r.completion_tokens == n);
    CHECK(r.completion_tokens <= n);
  }
  // A stop string from the middle of the greedy text: the text ends just before its first match.
  REQUIRE(want.size() > 30);
  const std::string stop = want.substr(20, 6);
  const std::string cut = want.substr(0, want.find(stop));
  INFO("stop '" << stop << "'");
  for (bool stream : {false, true}) {
    const Completion r = complete(s.port(), kRepeat, 40, stream, {{"stop", {stop}}});
    CHECK(r.text == cut);
    CHECK(r.finish_reason == "stop");
    if (!stream) CHECK(r.completion_tokens < 40);
  }
  CHECK(s.stop() == 0);
}

TEST_CASE("serve --spec: logprobs of a speculative session are plain decoding's", "[serve][spec]") {
  const json lp = {{"logprobs", 3}};
  json plain;
  {
    ServeProcess s({"-m", kModel, "--device", "cpu", "-c", "512", "--parallel", "2"});
    plain = complete(s.port(), kRepeat, 24, false, lp).logprobs;
    CHECK(s.stop() == 0);
  }
  // Token trees (sequence 0): each emitted token's row is its accepted path node's.
  for (const char* mode : {"lookup", "early:d=4,tree=2"}) {
    INFO(mode);
    ServeProcess s({"-m", kModel, "--device", "cpu", "-c", "512", "--parallel", "2", "--spec", mode});
    httplib::Client c("127.0.0.1", s.port());
    const json spec = complete(s.port(), kRepeat, 24, false, lp).logprobs;
    CHECK(metric(c, "strata_spec_accepted_tokens_total") > 0);
    REQUIRE(plain.is_object());
    CHECK(spec == plain);
    CHECK(s.stop() == 0);
  }
}

TEST_CASE("serve --spec: a client gone mid-stream frees its session, SIGTERM lets a round in flight finish",
          "[serve][spec]") {
  ServeProcess s({"-m", kModel, "--device", "cpu", "-c", "1024", "--parallel", "1", "--spec", "lookup",
                  "--max-tokens", "600"});
  httplib::Client c("127.0.0.1", s.port());
  // Sampled at a high temperature so the generation does not end early on an end-of-text token.
  const json body = {{"prompt", kRepeat}, {"max_tokens", 600}, {"temperature", 2}, {"top_k", 0}, {"top_p", 1},
                     {"min_p", 0}, {"seed", 5}, {"stream", true}};
  std::atomic<int> chunks{0};
  post_streaming(s.port(), body.dump(), [&](const char*, size_t) { return ++chunks < 3; });
  for (int i = 0; i < 1000 && metric(c, "strata_running_sessions") != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(metric(c, "strata_running_sessions") == 0);
  CHECK(metric(c, "strata_sessions_cancelled_total") == 1);
  CHECK(metric(c, "strata_spec_rounds_total") > 0);

  std::string stream;
  json b = body;
  b["max_tokens"] = 200;
  std::thread t([&] {
    post_streaming(s.port(), b.dump(), [&](const char* d, size_t n) {
      stream.append(d, n);
      return true;
    });
  });
  for (int i = 0; i < 1000 && metric(c, "strata_running_sessions") != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  s.signal(SIGTERM);
  t.join();
  CHECK(has(stream, "\"finish_reason\":\"length\""));
  CHECK(stream.ends_with("data: [DONE]\n\n"));
  CHECK(s.stop(0) == 0);  // signal 0: only reap
}

}  // namespace strata::test
