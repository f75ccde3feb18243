// The server's pure parts without a socket: request parsing (types, ranges, defaults, unknown
// fields) and the stop-string / UTF-8 filter over streamed text, and token log-probabilities with
// their alignment to that text.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"
#include "server/logprobs.h"
#include "server/request.h"
#include "server/response.h"
#include "server/text_filter.h"

namespace strata::server {

TEST_CASE("request: fields, defaults and errors", "[serve]") {
  CompletionRequest r;
  const RequestLimits lim{100, 4};
  REQUIRE_FALSE(parse_request(R"({"prompt":"hi","stop":"x","seed":18446744073709551615,"whatever":[1]})",
                              Endpoint::completions, lim, r));
  CHECK(r.prompt == "hi");
  CHECK(r.max_tokens == 100);  // the server's cap is the default
  CHECK(r.stop == std::vector<std::string>{"x"});
  CHECK(r.sp.seed == 18446744073709551615ull);  // exact, not through a double
  CHECK(r.sp.top_k == runtime::SamplerParams{}.top_k);

  REQUIRE_FALSE(parse_request(R"({"messages":[{"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
      "max_completion_tokens":5,"temperature":null,"stream":true,"stream_options":{"include_usage":true}})",
                              Endpoint::chat, lim, r));
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[1].content == "ab");
  CHECK(r.max_tokens == 5);
  CHECK(r.sp.temperature == runtime::SamplerParams{}.temperature);  // null: absent
  CHECK((r.stream && r.include_usage));

  auto param = [&](const char* body, Endpoint e = Endpoint::completions) {
    auto err = parse_request(body, e, lim, r);
    REQUIRE(err);
    CHECK(err->status == 400);
    return err->param;
  };
  CHECK(param("[1,2]").empty());
  CHECK(param("") .empty());
  CHECK(param(R"({"prompt":["a","b"]})") == "prompt");
  CHECK(param(R"({"prompt":"a","top_p":1.5})") == "top_p");
  CHECK(param(R"({"prompt":"a","top_k":-1})") == "top_k");
  CHECK(param(R"({"prompt":"a","seed":"1"})") == "seed");
  CHECK(param(R"({"prompt":"a","stop":["1","2","3","4","5"]})") == "stop");
  CHECK(param(R"({"prompt":"a","max_tokens":0})") == "max_tokens");
  CHECK(param(R"({"messages":[]})", Endpoint::chat) == "messages");
  CHECK(param(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", Endpoint::chat) ==
        "messages[].content");
}

TEST_CASE("text filter: stop strings end the text, their prefixes are held back", "[serve]") {
  TextFilter f({"STOP", "\n\n"});
  CHECK_FALSE(f.append("Hello S"));
  CHECK(f.take() == "Hello ");  // "S" may start "STOP"
  CHECK_FALSE(f.append("T"));
  CHECK(f.take().empty());
  CHECK_FALSE(f.append("ing"));
  CHECK(f.take() == "STing");  // no longer a prefix
  CHECK(f.append(" and\n\nmore"));
  CHECK(f.take() == " and");
  CHECK(f.flush().empty());
  CHECK(f.text() == "Hello STing and");

  TextFilter u({});
  u.append("caf\xc3");  // a piece ending inside "é"
  CHECK(u.take() == "caf");
  u.append("\xa9!");
  CHECK(u.take() == "\xc3\xa9!");

  TextFilter split({"STOP"});
  split.append("abST");
  CHECK(split.take() == "ab");
  CHECK(split.append("OPcd"));
  CHECK(split.flush().empty());
  CHECK(split.text() == "ab");
}

TEST_CASE("request: logprobs fields, their ranges and their shapes per endpoint", "[serve]") {
  CompletionRequest r;
  const RequestLimits lim{100, 4};
  REQUIRE_FALSE(parse_request(R"({"prompt":"hi"})", Endpoint::completions, lim, r));
  CHECK(r.logprobs == -1);
  REQUIRE_FALSE(parse_request(R"({"prompt":"hi","logprobs":0})", Endpoint::completions, lim, r));
  CHECK(r.logprobs == 0);
  REQUIRE_FALSE(parse_request(R"({"prompt":"hi","logprobs":20})", Endpoint::completions, lim, r));
  CHECK(r.logprobs == 20);
  REQUIRE_FALSE(parse_request(R"({"prompt":"hi","logprobs":null})", Endpoint::completions, lim, r));
  CHECK(r.logprobs == -1);
  const char* msgs = R"("messages":[{"role":"user","content":"x"}])";
  auto chat = [&](const std::string& rest) { return std::string("{") + msgs + rest + "}"; };
  REQUIRE_FALSE(parse_request(chat(R"(,"logprobs":true)"), Endpoint::chat, lim, r));
  CHECK(r.logprobs == 0);
  REQUIRE_FALSE(parse_request(chat(R"(,"logprobs":true,"top_logprobs":5)"), Endpoint::chat, lim, r));
  CHECK(r.logprobs == 5);
  REQUIRE_FALSE(parse_request(chat(R"(,"logprobs":false)"), Endpoint::chat, lim, r));
  CHECK(r.logprobs == -1);

  auto param = [&](const std::string& body, Endpoint e) {
    auto err = parse_request(body, e, lim, r);
    REQUIRE(err);
    CHECK(err->status == 400);
    return err->param;
  };
  CHECK(param(R"({"prompt":"a","logprobs":21})", Endpoint::completions) == "logprobs");
  CHECK(param(R"({"prompt":"a","logprobs":-1})", Endpoint::completions) == "logprobs");
  CHECK(param(R"({"prompt":"a","logprobs":true})", Endpoint::completions) == "logprobs");
  CHECK(param(R"({"prompt":"a","logprobs":2.5})", Endpoint::completions) == "logprobs");
  CHECK(param(chat(R"(,"logprobs":3)"), Endpoint::chat) == "logprobs");
  CHECK(param(chat(R"(,"logprobs":true,"top_logprobs":21)"), Endpoint::chat) == "top_logprobs");
  CHECK(param(chat(R"(,"logprobs":true,"top_logprobs":"5")"), Endpoint::chat) == "top_logprobs");
  CHECK(param(chat(R"(,"top_logprobs":2)"), Endpoint::chat) == "top_logprobs");  // needs logprobs: true
}

TEST_CASE("logprobs: log-softmax of the raw logits, top entries sorted, ties by id", "[serve]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 3);
  std::vector<float> logits(1000);
  for (float& l : logits) l = nd(rng);
  logits[17] = logits[400] = 30;  // a tie at the top
  std::vector<double> ref;
  runtime::log_softmax(logits.data(), logits.size(), ref);

  const TokenLogprob t = token_logprob(logits, 400, 20);
  CHECK(t.chosen.id == 400);
  CHECK(t.chosen.logprob == Approx(ref[400]).margin(1e-12));
  REQUIRE(t.top.size() == 20);
  CHECK(t.top[0].id == 17);  // equal logits: the lower id first (argmax's choice)
  CHECK(t.top[1].id == 400);
  CHECK(t.top[0].logprob == t.top[1].logprob);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  for (size_t k = 0; k < t.top.size(); ++k) {
    CHECK(t.top[k].id == order[k]);
    CHECK(t.top[k].logprob == Approx(ref[size_t(order[k])]).margin(1e-12));
    CHECK(t.top[k].logprob <= 0);
  }
  CHECK(token_logprob(logits, 3, 0).top.empty());
  const std::vector<float> two = {0, 0};
  CHECK(token_logprob(two, 1, 5).top.size() == 2);
  CHECK(token_logprob(two, 1, 5).chosen.logprob == Approx(std::log(0.5)));
}

TEST_CASE("logprobs: an entry is released with the last byte of its token's text", "[serve]") {
  // Tokens "ab", "c\xc3" (half of "é"), "\xa9S", "TO", "P!" with stop string "STOP": the text
  // shown is "abcé"; the token that starts the stop string is reported, the one inside it not.
  TextFilter f({"STOP"});
  PendingLogprobs p;
  std::vector<std::vector<TokenLogprob>> released;
  auto feed = [&](const std::string& piece, int32_t id) {
    TokenLogprob t;
    t.chosen = {id, piece, -0.5};
    const bool stopped = f.append(piece);
    p.push(t, piece.size());
    const std::string text = f.take();
    released.push_back(p.release(f.text(), f.sent()));
    return std::make_pair(text, stopped);
  };
  CHECK(feed("ab", 0) == std::make_pair(std::string("ab"), false));
  CHECK(released.back().size() == 1);
  CHECK(feed("c\xc3", 1) == std::make_pair(std::string("c"), false));
  CHECK(released.back().empty());  // its last byte is held back
  CHECK(feed("\xa9S", 2) == std::make_pair(std::string("\xc3\xa9"), false));
  REQUIRE(released.back().size() == 1);  // token 1 complete; token 2's "S" held back
  CHECK(released.back()[0].chosen.id == 1);
  CHECK(released.back()[0].text_offset == 2);
  CHECK(feed("TO", 3).second == false);
  CHECK(released.back().empty());
  CHECK(feed("P!", 4).second == true);
  CHECK(f.flush().empty());
  const auto rest = p.release_rest(f.text());
  REQUIRE(rest.size() == 1);  // token 2 starts before the cut; 3 and 4 lie inside "STOP" and after
  CHECK(rest[0].chosen.id == 2);
  CHECK(rest[0].text_offset == 3);  // code points: a, b, c, then é
  CHECK(f.text() == "abc\xc3\xa9");

  PendingLogprobs q;  // no stop string: everything is released at the end, empty pieces included
  q.push({}, 3);
  q.push({}, 0);
  CHECK(q.release_rest("xyz").size() == 2);
}

TEST_CASE("logprobs: the completions and chat shapes", "[serve]") {
  TokenLogprob t;
  t.chosen = {5, "Hi", -0.25};
  t.top = {{5, "Hi", -0.25}, {6, "\xc3", -2}, {7, "Hi", -3}};  // 7: the same piece as 5
  t.text_offset = 0;
  TokenLogprob u = t;
  u.text_offset = 2;
  const std::vector<TokenLogprob> lp = {t, u};
  const Usage usage{3, 2};
  auto body = nlohmann::json::parse(Response(Endpoint::completions, "m", true).complete("HiHi", lp, "length", usage));
  const auto& c = body["choices"][0]["logprobs"];
  CHECK(c["tokens"] == nlohmann::json({"Hi", "Hi"}));
  CHECK(c["token_logprobs"] == nlohmann::json({-0.25, -0.25}));
  CHECK(c["text_offset"] == nlohmann::json({0, 2}));
  REQUIRE(c["top_logprobs"][0].size() == 2);  // a piece once, with the likelier logprob
  CHECK(c["top_logprobs"][0]["Hi"] == -0.25);
  body = nlohmann::json::parse(Response(Endpoint::chat, "m", true).complete("HiHi", lp, "length", usage));
  const auto& content = body["choices"][0]["logprobs"]["content"];
  REQUIRE(content.size() == 2);
  CHECK(content[0]["token"] == "Hi");
  CHECK(content[0]["bytes"] == nlohmann::json({72, 105}));
  REQUIRE(content[0]["top_logprobs"].size() == 3);
  CHECK(content[0]["top_logprobs"][1]["bytes"] == nlohmann::json({0xc3}));
  CHECK(content[0]["top_logprobs"][1]["logprob"] == -2);
  // Not asked: null, as before.
  body = nlohmann::json::parse(Response(Endpoint::chat, "m").complete("HiHi", lp, "length", usage));
  CHECK(body["choices"][0]["logprobs"].is_null());
}

}  // namespace strata::server
