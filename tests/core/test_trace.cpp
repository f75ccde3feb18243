#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <thread>
#include <vector>

#include "core/trace.h"
#include "trace_spans.h"

using strata::Trace;

using strata::test::trace_spans;

TEST_CASE("trace: spans come out as valid Chrome trace JSON on named tracks", "[trace]") {
  Trace t;
  t.span("gpu compute", "attn 0", 10.0, 5.5);
  t.span("h2d copy", "ffn \"0\"\\\n", 3.0, 2.0);  // names needing escapes
  t.span("gpu compute", "ffn 0", 16.0, -1.0);     // a negative duration is clamped, not written
  const auto s = trace_spans(t);
  REQUIRE(s.size() == 3);
  CHECK(s[0].track == "gpu compute");
  CHECK(s[0].name == "attn 0");
  CHECK(s[0].ts == Approx(10.0));
  CHECK(s[0].dur == Approx(5.5));
  CHECK(s[1].track == "h2d copy");
  CHECK(s[1].name == "ffn \"0\"\\\n");
  CHECK(s[2].dur == 0.0);
  CHECK(t.size() == 3);
  CHECK(t.dropped() == 0);
}

TEST_CASE("trace: bounded, and says how many spans it dropped", "[trace]") {
  Trace t(4);
  for (int i = 0; i < 10; ++i) t.span("host", "step", i, 1);
  CHECK(t.size() == 4);
  CHECK(t.dropped() == 6);
  const auto j = nlohmann::json::parse(t.json());
  bool noted = false;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "i") noted = e.at("name").get<std::string>().find("6 later spans") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("trace: scopes measure host time, safe from many threads", "[trace]") {
  Trace t;
  {
    strata::TraceScope scope(&t, "host", "sleep");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  { strata::TraceScope none(nullptr, "host", "ignored"); }
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&t, k] {
      for (int i = 0; i < 500; ++i) t.span(k % 2 ? "cpu compute" : "disk read", "x", t.now_us(), 1);
    });
  for (auto& th : threads) th.join();
  const auto s = trace_spans(t);
  REQUIRE(s.size() == 2001);
  CHECK(s[0].name == "sleep");
  CHECK(s[0].dur >= 19'000.0);
  CHECK(s[0].dur < 5'000'000.0);
}
