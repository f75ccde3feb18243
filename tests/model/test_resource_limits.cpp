// Resource limits: a header that claims a huge array, string, vocabulary, head count or tensor is
// rejected with a message naming the claim and the limit, before anything is allocated from it
// (each case would otherwise allocate gigabytes or wrap a 32-bit width).
#include <catch2/catch.hpp>

#include <functional>

#include <fmt/format.h>

#include "gguf_bytes.h"
#include "model/gguf_file.h"
#include "model/model_spec.h"
#include "test_util.h"

using namespace strata;
using strata::test::GgufBytes;

namespace {

bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

std::string parse_error(const std::vector<uint8_t>& bytes, bool require_data = true) {
  auto f = gguf::File::parse(bytes, {.require_data = require_data});
  return f ? std::string("(parsed)") : f.message();
}

// A llama header (no tensor data) with the given extra kvs and tensors; counts are filled in.
struct Header {
  std::vector<std::function<void(GgufBytes&)>> kvs, tensors;
  std::vector<uint8_t> bytes() const {
    GgufBytes g;
    g.header(tensors.size(), kvs.size() + 5).kv_str("general.architecture", "llama");
    g.kv_u32("llama.embedding_length", 64).kv_u32("llama.block_count", 1).kv_u32("llama.feed_forward_length", 128);
    g.kv_u32("llama.context_length", 256);
    for (const auto& kv : kvs) kv(g);
    for (const auto& t : tensors) t(g);
    return g.pad_to(32).b;
  }
};

std::string spec_error(Header h, uint32_t n_head = 4) {
  h.kvs.push_back([=](GgufBytes& g) { g.kv_u32("llama.attention.head_count", n_head); });
  const auto bytes = h.bytes();
  auto f = gguf::File::parse(bytes, {.require_data = false});
  if (!f) return "reader: " + f.message();
  auto s = model::spec_from_gguf(*f);
  return s ? std::string("(ok)") : s.message();
}

}  // namespace

TEST_CASE("a metadata array claiming more items than strata allows is rejected before allocation",
          "[gguf][limits]") {
  // Within the bytes of the file (one byte per u8 item), past the limit: 2^25 + 1 items would be
  // ~1.6 GB of Values.
  const uint64_t n = gguf::kMaxMetadataValues + 1;
  GgufBytes g;
  g.header(0, 1).str("big").u32(9).u32(0).u64(n);  // array of u8
  g.zeros(n);
  const std::string e = parse_error(g.b);
  INFO(e);
  CHECK(has(e, "metadata key 'big'"));
  CHECK(has(e, "33554433 elements take the metadata past strata's limit of 33554432"));
}

TEST_CASE("a metadata string longer than strata allows is rejected before allocation", "[gguf][limits]") {
  const uint64_t n = gguf::kMaxStringBytes + 1;
  GgufBytes g;
  g.header(0, 1).str("template").u32(8).u64(n);
  g.zeros(n);
  const std::string e = parse_error(g.b);
  INFO(e);
  CHECK(has(e, "string value at offset 44: length 16777217 is beyond strata's limit of 16777216 bytes"));
}

TEST_CASE("a tensor claiming more bytes than the file holds is rejected", "[gguf][limits]") {
  // 2^20 x 2^30 f32: 4 PiB claimed by a 100-byte file.
  GgufBytes g;
  g.header(1, 0).tensor("huge", {1ull << 20, 1ull << 30}, 0, 0).pad_to(32);
  CHECK(has(parse_error(g.b), "truncated: tensor 'huge' needs file bytes"));
  // Header-only opens (inspect, plan) keep it, without data: nothing is allocated from the claim.
  auto f = gguf::File::parse(g.b, {.require_data = false});
  REQUIRE(f.is_ok());
  CHECK(f->tensors()[0].data == nullptr);
  GgufBytes o;
  o.header(1, 0).tensor("overflow", {1ull << 40, 1ull << 40}, 0, 0).pad_to(32);
  CHECK(has(parse_error(o.b, false), "element count overflows"));
  // 2^31 x 2^31 f32 is 2^64 bytes: n_bytes wrapped to 0 and the tensor "fit" in any file.
  GgufBytes w;
  w.header(1, 0).tensor("wraps", {1ull << 31, 1ull << 31}, 0, 0).pad_to(32);
  CHECK(has(parse_error(w.b, false), "tensor 'wraps' (#0, info at offset 24): byte size overflows (shape [2147483648, 2147483648], type f32)"));
  // The same file as committed for the fuzz target to replay.
  const std::string r = test::fuzz_regression("gguf", "f32-byte-size-wraps.gguf");
  CHECK(has(parse_error(std::vector<uint8_t>(r.begin(), r.end()), false), "byte size overflows"));
}

TEST_CASE("a model claiming a huge vocabulary or head count is rejected", "[gguf][limits]") {
  Header ok;
  ok.kvs.push_back([](GgufBytes& g) { g.kv_u32("llama.vocab_size", 32); });
  REQUIRE(spec_error(ok) == "(ok)");
  // The embedding is the authority on n_vocab: 2^24 + 1 rows, and 2^32 + 5 rows (which the
  // 32-bit n_vocab used to wrap to 5).
  for (uint64_t rows : {uint64_t(model::kMaxVocab) + 1, (uint64_t(1) << 32) + 5}) {
    Header v;
    v.tensors.push_back([=](GgufBytes& g) { g.tensor("token_embd.weight", {64, rows}, 0, 0); });
    const std::string e = spec_error(v);
    INFO(e);
    CHECK(has(e, fmt::format("vocabulary of {} tokens is beyond strata's limit of 16777216", rows)));
  }
  Header k;
  k.kvs.push_back([](GgufBytes& g) { g.kv_u32("llama.vocab_size", 1u << 30); });
  CHECK(has(spec_error(k), "vocabulary of 1073741824 tokens is beyond"));
  // n_head * head_dim = (2^20 + 1) * 4096 wraps 32 bits to 4096.
  Header heads;
  heads.kvs.push_back([](GgufBytes& g) { g.kv_u32("llama.attention.key_length", 4096); });
  heads.kvs.push_back([](GgufBytes& g) { g.kv_u32("llama.vocab_size", 32); });
  const std::string e = spec_error(heads, (1u << 20) + 1);
  INFO(e);
  CHECK(has(e, "implausible dimensions"));
  CHECK(has(e, "n_head 1048577"));
}
