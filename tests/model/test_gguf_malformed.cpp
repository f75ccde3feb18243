// A corpus of malformed GGUF files: each must be rejected with a precise message (what and where),
// never a crash, and (under ASan/UBSan in CI) never an out-of-bounds read. Each case states the
// fault, builds the bytes, and names the words the error must contain.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "gguf_bytes.h"
#include "model/gguf_file.h"
#include "test_util.h"

using strata::gguf::File;
using strata::gguf::OpenOptions;
using strata::test::GgufBytes;

namespace {

struct Case {
  const char* fault;
  std::vector<uint8_t> bytes;
  std::vector<std::string> expect;  // substrings of the error message
  bool header_only_ok = false;      // a data-only fault: opens with require_data = false
};

// A valid file: one kv, one f32 tensor "w" of 8 elements.
GgufBytes valid_prefix() { return GgufBytes().header(1, 1).kv_u32("a.b", 7); }

std::vector<Case> corpus() {
  std::vector<Case> c;
  c.push_back({"bad magic", GgufBytes().u32(0x46554746).u32(3).u64(0).u64(0).b, {"not a GGUF file", "magic"}});
  c.push_back({"version 1", GgufBytes().header(0, 0, 1).b, {"version 1"}});
  c.push_back({"version 7", GgufBytes().header(0, 0, 7).b, {"unsupported GGUF version 7"}});
  c.push_back({"big-endian", GgufBytes().header(0, 0, 0x03000000).b, {"big-endian"}});
  c.push_back({"truncated header", GgufBytes().u32(0x46554747).u32(3).u32(0).b, {"truncated", "tensor count"}});
  c.push_back({"empty file", {}, {"truncated", "magic"}});
  c.push_back({"huge kv count", GgufBytes().header(0, 1ull << 60).b, {"metadata count", "cannot fit"}});
  c.push_back({"huge tensor count", GgufBytes().header(1ull << 58, 0).b, {"tensor count", "cannot fit"}});
  c.push_back({"key length beyond file", GgufBytes().header(0, 1).u64(1ull << 40).zeros(8).b,
               {"metadata key", "length 1099511627776 exceeds"}});
  c.push_back({"empty key", GgufBytes().header(0, 1).str("").u32(4).u32(1).b, {"metadata key at offset 24 is empty"}});
  c.push_back({"unknown value type", GgufBytes().header(0, 1).str("k.x").u32(13).u32(0).b,
               {"'k.x'", "unknown value type 13"}});
  c.push_back({"array of unknown type", GgufBytes().header(0, 1).str("k.arr").u32(9).u32(42).u64(1).b,
               {"'k.arr'", "unknown element type 42"}});
  c.push_back({"array count beyond file", GgufBytes().header(0, 1).str("k.arr").u32(9).u32(4).u64(1ull << 40).b,
               {"'k.arr'", "1099511627776 elements", "cannot fit"}});
  {
    GgufBytes g = GgufBytes().header(0, 1).str("k.deep").u32(9);
    for (int i = 0; i < 9; ++i) g.u32(9).u64(1);
    g.u32(4).u64(1).u32(0);
    c.push_back({"arrays nested too deep", g.b, {"'k.deep'", "nested deeper than 8"}});
  }
  c.push_back({"bool not 0/1", GgufBytes().header(0, 1).str("k.b").u32(7).u8(2).b, {"'k.b'", "bool value 2"}});
  c.push_back({"string value beyond file", GgufBytes().header(0, 1).str("k.s").u32(8).u64(999).b,
               {"'k.s'", "string value", "length 999 exceeds"}});
  c.push_back({"value cut short", GgufBytes().header(0, 1).str("k.u").u32(10).u32(0).b,
               {"'k.u'", "truncated", "u64 value"}});
  c.push_back({"duplicate key", GgufBytes().header(0, 2).kv_u32("k.dup", 1).kv_u32("k.dup", 2).b,
               {"duplicate metadata key 'k.dup'"}});
  c.push_back({"alignment not a power of two", GgufBytes().header(0, 1).kv_u32("general.alignment", 24).b,
               {"general.alignment = 24", "power of two"}});
  c.push_back({"alignment of wrong type", GgufBytes().header(0, 1).kv_str("general.alignment", "32").b,
               {"general.alignment has type string"}});
  c.push_back({"zero dims", valid_prefix().str("w").u32(0).u32(0).u64(0).b, {"tensor 'w'", "0 dimensions"}});
  c.push_back({"five dims", valid_prefix().tensor("w", {1, 1, 1, 1, 1}, 0, 0).b, {"tensor 'w'", "5 dimensions"}});
  c.push_back({"zero-size dim", valid_prefix().tensor("w", {8, 0}, 0, 0).b, {"tensor 'w'", "dimension 1 is zero"}});
  c.push_back({"dims overflow", valid_prefix().tensor("w", {1ull << 32, 1ull << 32}, 0, 0).b,
               {"tensor 'w'", "overflows"}});
  c.push_back({"unknown tensor type", valid_prefix().tensor("w", {8}, 99, 0).b, {"tensor 'w'", "unknown tensor type 99"}});
  c.push_back({"row not a block multiple", valid_prefix().tensor("w", {20, 2}, 2, 0).b,
               {"tensor 'w'", "row length 20", "q4_0", "block size 32"}});
  c.push_back({"empty tensor name", valid_prefix().tensor("", {8}, 0, 0).b, {"(#0, info at offset 43)", "empty name"}});
  {
    GgufBytes g = valid_prefix().tensor("w", {8}, 0, 16);
    g.pad_to(32).zeros(64);
    c.push_back({"misaligned data offset", g.b, {"tensor 'w'", "offset 16", "alignment 32"}});
  }
  {
    GgufBytes g = valid_prefix().tensor("w", {8}, 0, 0);
    g.pad_to(32).zeros(16);  // needs 32 bytes of data, has 16
    c.push_back({"tensor data truncated", g.b, {"truncated", "tensor 'w'", "needs file bytes"}, true});
  }
  {
    GgufBytes g = GgufBytes().header(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32);
    g.pad_to(32).zeros(64);
    c.push_back({"duplicate tensor name", g.b, {"duplicate tensor name 'w'"}});
  }
  {
    GgufBytes g = GgufBytes().header(2, 0).tensor("w1", {16}, 0, 0).tensor("w2", {8}, 0, 32);
    g.pad_to(32).zeros(128);
    c.push_back({"overlapping tensors", g.b, {"tensor 'w2'", "overlaps tensor 'w1'"}});
  }
  {
    GgufBytes g = valid_prefix().tensor("w", {8}, 0, ~0ull - 31);
    g.pad_to(32).zeros(32);
    c.push_back({"data offset overflow", g.b, {"tensor 'w'", "overflows"}});
  }
  c.push_back({"tensor info cut short", valid_prefix().str("w").u32(2).u64(8).b, {"tensor 'w'", "truncated", "dimension"}});
  return c;
}

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace

TEST_CASE("malformed GGUF files give precise errors", "[gguf][malformed]") {
  const auto cases = corpus();
  REQUIRE(cases.size() >= 20);
  for (const auto& c : cases) {
    INFO("fault: " << c.fault);
    auto f = File::parse(c.bytes, {}, "bad.gguf");
    REQUIRE_FALSE(f.is_ok());
    INFO("message: " << f.message());
    CHECK(contains(f.message(), "bad.gguf: "));
    for (const auto& want : c.expect) CHECK(contains(f.message(), want));
    // A header-only open tolerates missing data, and nothing else.
    auto h = File::parse(c.bytes, {.require_data = false}, "bad.gguf");
    CHECK(h.is_ok() == c.header_only_ok);
  }
}

TEST_CASE("every prefix of a valid file is rejected cleanly", "[gguf][malformed]") {
  GgufBytes g = GgufBytes().header(1, 2).kv_u32("a.b", 7).str("k.arr").u32(9).u32(8).u64(2).str("x").str("yz");
  g.tensor("w", {8}, 0, 0).pad_to(32).zeros(32);
  REQUIRE(File::parse(g.b).is_ok());
  for (size_t n = 0; n < g.b.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    std::vector<uint8_t> cut(g.b.begin(), g.b.begin() + long(n));
    auto f = File::parse(cut);
    CHECK_FALSE(f.is_ok());
  }
}

TEST_CASE("random byte flips never crash the reader", "[gguf][malformed]") {
  GgufBytes g = GgufBytes().header(2, 3).kv_u32("a.b", 7).kv_str("general.architecture", "llama");
  g.str("k.arr").u32(9).u32(6).u64(3).u32(1).u32(2).u32(3);
  g.tensor("w", {32, 2}, 8, 0).tensor("v", {8}, 0, 96).pad_to(32).zeros(128);
  REQUIRE(File::parse(g.b).is_ok());
  const uint64_t seed = strata::test::fresh_seed();
  INFO("seed " << seed);
  strata::Rng rng(seed);
  int rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto bytes = g.b;
    const int flips = 1 + int(rng.next_u32() % 4);
    for (int i = 0; i < flips; ++i) bytes[rng.next_u32() % bytes.size()] ^= uint8_t(1u << (rng.next_u32() % 8));
    auto f = File::parse(bytes);
    if (!f) {
      ++rejected;
      CHECK(!f.message().empty());
    } else {
      for (const auto& t : f->tensors())  // accepted: every tensor's bytes lie inside the buffer
        if (t.data) CHECK(t.data + t.n_bytes <= bytes.data() + bytes.size());
    }
  }
  CHECK(rejected > 0);
}

TEST_CASE("open reports missing and unreadable files", "[gguf][malformed]") {
  auto f = File::open("/nonexistent/model.gguf");
  REQUIRE_FALSE(f.is_ok());
  CHECK(contains(f.message(), "/nonexistent/model.gguf"));
  CHECK(contains(f.message(), "No such file"));
  auto d = File::open("/tmp");
  REQUIRE_FALSE(d.is_ok());
  CHECK(contains(d.message(), "not a regular file"));
}
