// The server's pure parts without a socket: request parsing (types, ranges, defaults, unknown
// fields) and the stop-string / UTF-8 filter over streamed text.
#include <catch2/catch.hpp>

#include "server/request.h"
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

}  // namespace strata::server
