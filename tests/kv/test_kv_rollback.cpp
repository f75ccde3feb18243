// Rollback property: after any sequence of appends (chunks of up to `margin` tokens, wrapping the
// sliding ring many times) and truncates (rollbacks of at most `margin` positions past the high-water
// mark, as speculative decoding does, plus restarts from 0), the cache equals one built from
// scratch with the surviving tokens: the stored rows every later query can see are byte-equal, and
// the attention output of the next chunk's queries is bit-equal. Ring and full layers, every dtype.
// The valid length lives in a kv::SequenceTable beside the storage (as in the engines); the table
// agrees that every rollback made here is within its rule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kv/kv_cache.h"
#include "kv/kv_quant.h"
#include "kv/sequence_table.h"
#include "test_util.h"

using namespace strata;
namespace cpu = strata::kernels::cpu;

namespace {

constexpr uint32_t kHeadDim = 32, kHeadsKv = 2, kHeads = 4, kWidth = kHeadsKv * kHeadDim;
constexpr uint32_t kWindow = 24, kMargin = 8, kCtx = 160;
const std::vector<kv::LayerShape> kLayers = {{kWidth, kWindow, kHeadDim}, {kWidth, 0, kHeadDim}};  // ring, full

struct Token {
  std::vector<float> k[2], v[2];  // per layer
};

Token random_token(Rng& rng) {
  Token t;
  for (int il = 0; il < 2; ++il) {
    t.k[il] = test::random_normal(kWidth, rng, 1.0f);
    t.v[il] = test::random_normal(kWidth, rng, 1.0f);
  }
  return t;
}

void write(kv::KvCache& c, uint32_t pos, const Token& t) {
  for (uint32_t il = 0; il < 2; ++il) c.write(il, pos, t.k[il].data(), t.v[il].data());
}

kv::KvCache from_scratch(const std::vector<Token>& tokens, uint32_t n, GgmlType kt, GgmlType vt) {
  auto c = kv::KvCache::create(kLayers, kCtx, kMargin, kt, vt);
  REQUIRE(c.is_ok());
  for (uint32_t p = 0; p < n; ++p) write(*c, p, tokens[p]);
  return std::move(c.value());
}

// The rows a query at position >= n can see: the last window (ring) or everything (full).
void require_same_rows(const kv::KvCache& a, const kv::KvCache& b, uint32_t n) {
  for (uint32_t il = 0; il < 2; ++il) {
    const uint32_t lo = kLayers[il].window ? (n > kWindow ? n - kWindow : 0) : 0;
    for (uint32_t p = lo; p < n; ++p) {
      INFO("layer " << il << " pos " << p << " n " << n);
      REQUIRE(std::memcmp(a.k_row(il, p), b.k_row(il, p), a.k_row_bytes(il)) == 0);
      REQUIRE(std::memcmp(a.v_row(il, p), b.v_row(il, p), a.v_row_bytes(il)) == 0);
    }
  }
}

// Attention of the queries at positions [first, first + n_q) in both layers, bit-equal.
void require_same_attention(const kv::KvCache& a, const kv::KvCache& b, uint32_t first, uint32_t n_q, Rng& rng) {
  std::vector<int32_t> pos(n_q);
  for (uint32_t i = 0; i < n_q; ++i) pos[i] = int32_t(first + i);
  const auto q = test::random_normal(size_t(n_q) * kHeads * kHeadDim, rng, 1.0f);
  for (uint32_t il = 0; il < 2; ++il) {
    const cpu::AttentionShape s{kHeads, kHeadsKv, kHeadDim, kLayers[il].window, 0.2f};
    std::vector<float> x(q.size(), NAN), y(q.size(), NAN);
    cpu::attention(q.data(), pos.data(), n_q, a.view(il), s, x.data());
    cpu::attention(q.data(), pos.data(), n_q, b.view(il), s, y.data());
    INFO("layer " << il << " queries [" << first << ", " << first + n_q << ")");
    REQUIRE(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("kv rollback: random appends and truncates equal a cache built from scratch", "[kv]") {
  const std::pair<GgmlType, GgmlType> types[] = {
      {GgmlType::F32, GgmlType::F32},   {GgmlType::F16, GgmlType::F16}, {GgmlType::Q8_0, GgmlType::Q8_0},
      {GgmlType::Q4_1, GgmlType::Q4_1}, {GgmlType::Q8_0, GgmlType::Q4_1}, {GgmlType::F16, GgmlType::Q8_0},
  };
  for (const auto& [kt, vt] : types) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {  // fixed seeds: a failure reproduces
      INFO("k " << kv::kv_type_name(kt) << " v " << kv::kv_type_name(vt) << " seed " << seed);
      Rng rng(seed * 7919 + uint64_t(kt) * 31 + uint64_t(vt));
      auto cache = kv::KvCache::create(kLayers, kCtx, kMargin, kt, vt);
      REQUIRE(cache.is_ok());
      kv::SequenceTable seqs({kWindow, 0}, kCtx, kMargin, 1);
      for (uint32_t il = 0; il < 2; ++il) REQUIRE(seqs.slots(il) == cache->capacity(il));
      std::vector<Token> tokens(kCtx);  // what each surviving position holds
      uint32_t n = 0, high = 0;          // valid length; 1 + highest position written since the last restart
      uint32_t reused = 0, rollbacks = 0;
      for (int op = 0; op < 250; ++op) {
        INFO("op " << op << " n " << n << " high " << high);
        const uint32_t r = rng.next_u32() % 100;
        if (r < 55 && n < kCtx) {
          // Append a chunk: its queries attend like a prefill chunk or a speculative verify.
          const uint32_t c = std::min(kCtx - n, 1 + rng.next_u32() % kMargin);
          REQUIRE(seqs.check_write(0, n, c).is_ok());
          for (uint32_t p = n; p < n + c; ++p) {
            tokens[p] = random_token(rng);
            write(*cache, p, tokens[p]);
          }
          const auto ref = from_scratch(tokens, n + c, kt, vt);
          require_same_attention(*cache, ref, n, c, rng);
          reused += n + c > kWindow + kMargin;  // this chunk overwrote ring slots
          n += c;
          high = std::max(high, n);
          seqs.append(0, c);
        } else if (r < 95) {
          // Roll back: no write may have gone more than `margin` past the new length.
          const uint32_t lo = high > kMargin ? high - kMargin : 0;
          if (n < lo) FAIL("invariant: n >= high - margin");
          n = lo + rng.next_u32() % (n - lo + 1);
          REQUIRE(seqs.can_truncate(0, n));
          seqs.truncate(0, n);
          if (n == 0) high = 0;  // nothing is visible any more: a restart
          ++rollbacks;
        } else {
          n = high = 0;  // restart the sequence
          seqs.truncate(0, 0);
        }
        REQUIRE(seqs.length(0) == n);
        REQUIRE(seqs.written_end(0) == high);
        const auto ref = from_scratch(tokens, n, kt, vt);
        require_same_rows(*cache, ref, n);
        if (n > 0) require_same_attention(*cache, ref, n - 1, 1, rng);  // the last token's query again
      }
      CHECK(reused > 20);  // the ring did wrap, many times
      CHECK(rollbacks > 20);
    }
  }
}
