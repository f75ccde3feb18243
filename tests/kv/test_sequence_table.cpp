// kv::SequenceTable: the KV rules both engines share (slots, write-ahead margin, context-full
// errors, batched row positions, rollback), tested without any storage. The rollback rule is
// checked against a brute-force model of the ring: a slot per position, overwritten by each write.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kv/sequence_table.h"

using namespace strata;

namespace {

bool has(const Status& s, const std::string& text) { return !s.is_ok() && s.message().find(text) != std::string::npos; }

}  // namespace

TEST_CASE("sequence table: slots, context-full and write-ahead errors", "[kv]") {
  kv::SequenceTable t({8, 0, 8}, 64, 4, 2);  // ring, full, ring; margin 4
  CHECK(t.n_layer() == 3);
  CHECK(t.slots(0) == 12);
  CHECK(t.slots(1) == 64);
  CHECK(t.slot(0, 13) == 1);
  CHECK(t.slot(1, 13) == 13);
  kv::SequenceTable small({8, 0}, 10, 4, 1);  // the ring is capped by the context
  CHECK(small.slots(0) == 10);

  CHECK(has(t.check_seq(2), "sequence 2 is out of range (the engine holds 2)"));
  CHECK(t.check_append(0, 64).is_ok());
  CHECK(has(t.check_append(0, 65), "context full: 0 tokens already, 65 more would exceed the context of 64"));
  t.append(0, 60);
  CHECK(t.length(0) == 60);
  CHECK(t.length(1) == 0);
  CHECK(has(t.check_append(0, 5), "context full: 60 tokens already"));
  CHECK(t.check_write(0, 60, 4).is_ok());
  CHECK(has(t.check_write(0, 62, 3), "context full: positions up to 65"));
  CHECK(has(t.check_write(1, 2, 3), "positions up to 5 are more than ubatch (4) past the 0 evaluated"));

  // A draft writes ahead without moving the length; a complete pass moves it.
  t.wrote(0, 60, 1, false);
  t.wrote(0, 61, 1, false);
  CHECK(t.length(0) == 60);
  CHECK(t.written_end(0) == 62);
  t.wrote(0, 60, 3, true);
  CHECK(t.length(0) == 63);
  t.truncate(0, 70);  // never grows
  CHECK(t.length(0) == 63);
  t.truncate(0, 0);
  CHECK(t.length(0) == 0);
  CHECK(t.written_end(0) == 0);
}

TEST_CASE("sequence table: batched rows take consecutive positions per sequence", "[kv]") {
  kv::SequenceTable t({0}, 8, 3, 3);
  t.append(0, 2);
  t.append(1, 7);
  const std::vector<uint32_t> ok = {0, 2, 0, 2, 2};
  auto pos = t.place_rows(ok);
  REQUIRE(pos.is_ok());
  CHECK(*pos == std::vector<int32_t>{2, 0, 3, 1, 2});
  t.placed(ok, *pos);
  CHECK(t.length(0) == 4);
  CHECK(t.length(1) == 7);
  CHECK(t.length(2) == 3);
  const std::vector<uint32_t> out = {0, 3}, full = {1, 1}, many = {0, 0, 0, 0};
  CHECK(has(t.place_rows(out).status(), "row 1: sequence 3 is out of range (the engine holds 3)"));
  CHECK(has(t.place_rows(full).status(), "row 1: context of sequence 1 full (8 tokens, context 8)"));
  CHECK(has(t.place_rows(many).status(), "row 3: more than ubatch (3) rows of sequence 0 in one step"));
}

TEST_CASE("sequence table: can_truncate is exactly 'every key later queries read is still in its slot'", "[kv]") {
  constexpr uint32_t kWindow = 6, kMargin = 3, kCtx = 200;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    Rng rng(seed);
    kv::SequenceTable t({kWindow, 0}, kCtx, kMargin, 1);
    const uint32_t cap = t.slots(0);
    REQUIRE(cap == kWindow + kMargin);
    std::vector<int64_t> slot(cap, -1);  // the position each ring slot holds
    auto write = [&](uint32_t p0, uint32_t n) {
      for (uint32_t p = p0; p < p0 + n; ++p) slot[t.slot(0, p)] = p;
    };
    // Brute force: queries at n and after read ring positions [max(0, n - window + 1), n).
    auto intact = [&](uint32_t n) {
      for (uint32_t p = n >= kWindow ? n - kWindow + 1 : 0; p < n; ++p)
        if (slot[t.slot(0, p)] != int64_t(p)) return false;
      return true;
    };
    uint32_t refused = 0, allowed = 0;
    for (int op = 0; op < 400; ++op) {
      const uint32_t len = t.length(0), r = rng.next_u32() % 10;
      INFO("op " << op << " length " << len << " written " << t.written_end(0));
      if (r < 5) {  // a chunk, a verify pass or a draft, at most margin ahead
        const uint32_t n = 1 + rng.next_u32() % kMargin;
        if (!t.check_write(0, len, n).is_ok()) continue;
        const bool complete = r < 3;
        write(len, n);
        t.wrote(0, len, n, complete);
      } else if (r < 9 && len > 0) {
        for (uint32_t n = 1; n < len; ++n) {
          INFO("truncate to " << n);
          REQUIRE(t.can_truncate(0, n) == intact(n));
          (intact(n) ? allowed : refused) += 1;
        }
        uint32_t n = rng.next_u32() % (len + 1);
        while (!t.can_truncate(0, n)) ++n;
        t.truncate(0, n);
        if (n == 0) std::fill(slot.begin(), slot.end(), -1);
      } else {
        t.truncate(0, 0);
        std::fill(slot.begin(), slot.end(), -1);
      }
    }
    CHECK(refused > 0);
    CHECK(allowed > 0);
  }
  // Without a ring shorter than the context, any rollback keeps every key.
  kv::SequenceTable full({0, 0}, 16, 2, 1);
  full.append(0, 2);
  full.wrote(0, 2, 2, true);
  CHECK(full.can_truncate(0, 1));
}
