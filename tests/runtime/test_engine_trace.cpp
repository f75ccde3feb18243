// --trace on the CPU engine: one span per weight block per chunk on the "cpu compute" track, in
// forward order, each inside its chunk's span on the "host" track.
#include <catch2/catch.hpp>

#include "runtime/cpu_forward.h"
#include "test_util.h"
#include "trace_spans.h"

using namespace strata;

TEST_CASE("the CPU engine traces every block of every chunk", "[runtime][trace]") {
  auto model = runtime::Model::load(test::testdata("models/llama/model.gguf"));
  REQUIRE(model.is_ok());
  const uint32_t n_layer = (*model)->spec.hp.n_layer;
  runtime::ForwardOptions opt;
  opt.n_ctx = 64;
  opt.ubatch = 4;
  opt.trace = std::make_shared<Trace>();
  auto e = runtime::CpuForward::create(model.value(), opt);
  REQUIRE(e.is_ok());
  std::vector<float> logits;
  const std::vector<int32_t> prompt{1, 2, 3, 4, 5, 6};  // two chunks: 4 + 2 tokens
  REQUIRE((*e)->eval(prompt, runtime::Logits::last, logits).is_ok());
  const int32_t next = 7;
  REQUIRE((*e)->eval(std::span(&next, 1), runtime::Logits::last, logits).is_ok());

  std::vector<test::TraceSpan> host, blocks;
  for (const auto& s : test::trace_spans(*opt.trace)) (s.track == "host" ? host : blocks).push_back(s);
  REQUIRE(host.size() == 3);
  CHECK(host[0].name == "prefill 4 tokens");
  CHECK(host[1].name == "prefill 2 tokens");
  CHECK(host[2].name == "decode step");
  // The first chunk has no head (its logits are not wanted); the other two end with it.
  REQUIRE(blocks.size() == 3 * 2 * n_layer + 2);
  size_t i = 0;
  for (size_t c = 0; c < 3; ++c) {
    for (uint32_t il = 0; il < n_layer; ++il) {
      CHECK(blocks[i++].name == "attn " + std::to_string(il));
      CHECK(blocks[i++].name == "ffn " + std::to_string(il));
    }
    if (c > 0) CHECK(blocks[i++].name == "head");
  }
  for (const auto& b : blocks) {
    CHECK(b.track == "cpu compute");
    bool inside = false;
    for (const auto& h : host) inside |= b.ts >= h.ts && b.end() <= h.end() + 1.0;
    CHECK(inside);
  }
}
