// The CPU reference's token-tree mask (kernels/cpu/attention_tree.h), the oracle of the GPU tree
// tests: the chain mask (every new token sees all earlier ones) is plain causal attention bit for
// bit; a query's output does not move when a new key it does not see changes, and does when one
// it sees changes (so the mask removes exactly the keys whose bit is clear).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/attention_tree.h"
#include "kernels/cpu/q8_act.h"
#include "kernels/cpu/quant_kernels.h"

namespace {

using namespace strata;
using namespace strata::kernels::cpu;

constexpr int64_t kHeads = 4, kHeadsKv = 2, kHd = 64, kWidth = kHeadsKv * kHd;

std::vector<float> random_values(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(double(rng.next_u64() >> 11) * 0x1p-53 * 2.0 - 1.0);
  return v;
}

// n_q new tokens at first .. first + n_q - 1 over an f32 store of first + n_q slots.
struct Tree {
  int32_t first = 0;
  int64_t n_q = 0;
  std::vector<float> k, v, q;
  std::vector<int32_t> pos;
  Tree(int32_t first_, int64_t n, Rng& rng)
      : first(first_), n_q(n), k(random_values(size_t((first_ + n) * kWidth), rng)),
        v(random_values(size_t((first_ + n) * kWidth), rng)), q(random_values(size_t(n * kHeads * kHd), rng)) {
    for (int64_t i = 0; i < n; ++i) pos.push_back(first + int32_t(i));
  }
  std::vector<float> run(const uint64_t* bits) const {
    std::vector<float> out(q.size());
    const KvStore kv{k.data(), v.data(), GgmlType::F32, GgmlType::F32, first + n_q};
    const AttentionShape s{kHeads, kHeadsKv, kHd, 0, 0.125f};
    if (bits)
      attention_tree(q.data(), pos.data(), n_q, kv, s, TreeMask{bits, first}, out.data());
    else
      attention(q.data(), pos.data(), n_q, kv, s, out.data());
    return out;
  }
};

}  // namespace

TEST_CASE("CPU attention: the chain tree mask is plain causal attention, bit for bit", "[attention]") {
  Rng rng(11);
  const Tree t(200, 12, rng);
  std::vector<uint64_t> chain(12);
  for (size_t i = 0; i < chain.size(); ++i) chain[i] = (uint64_t(2) << i) - 1;
  const auto a = t.run(chain.data()), b = t.run(nullptr);
  REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

TEST_CASE("CPU attention: a tree query ignores the new keys outside its mask and only those", "[attention]") {
  Rng rng(12);
  Tree t(100, 6, rng);
  // Tokens 0 <- 1 <- 3 and 0 <- 2 <- 4, 5 alone: query 3 sees 0, 1, 3 of the new keys.
  const std::vector<uint64_t> bits = {0b000001, 0b000011, 0b000101, 0b001011, 0b010101, 0b100000};
  const size_t row = size_t(kHeads * kHd);
  const auto base = t.run(bits.data());
  for (int64_t j = 0; j < 6; ++j) {
    Tree u = t;
    for (int64_t c = 0; c < kWidth; ++c) u.v[size_t((t.first + j) * kWidth + c)] += 1.0f;  // move new key j's V
    const auto moved = u.run(bits.data());
    const bool seen = (bits[3] >> j) & 1u;
    INFO("new key " << j);
    CHECK((std::memcmp(moved.data() + 3 * row, base.data() + 3 * row, row * 4) == 0) == !seen);
  }
}

namespace {

// attention.h's per-query arithmetic written out plainly (this file has no -mfma: each multiply
// and add rounds alone): q.k by best_dot(F32) times the scale, the max, expf, the denominator in
// double, out = 0 + p * v key by key. Ring store of `cap` slots, window `win` (0: none).
void plain_attention(const float* q, int32_t pos, const float* k, const float* v, int64_t cap, int64_t win,
                     float scale, float* out) {
  const DotFn dot = best_dot(GgmlType::F32);
  const int64_t lo = win > 0 ? std::max<int64_t>(0, pos - win + 1) : 0, n = pos - lo + 1;
  for (int64_t h = 0; h < kHeads; ++h) {
    const int64_t kvh = h / (kHeads / kHeadsKv);
    std::vector<float> s(static_cast<size_t>(n));
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = dot(k + ((lo + j) % cap) * kWidth + kvh * kHd, q + h * kHd, kHd) * scale;
      mx = std::max(mx, s[j]);
    }
    double den = 0;
    for (int64_t j = 0; j < n; ++j) s[j] = fast_exp::exp_weight(s[j] - mx), den += s[j];  // the engine's e^t
    const float inv = float(1.0 / den);
    float* o = out + h * kHd;
    std::fill(o, o + kHd, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float p = s[j] * inv;
      const float* vr = v + ((lo + j) % cap) * kWidth + kvh * kHd;
      for (int64_t d = 0; d < kHd; ++d) {
        const float pv = p * vr[d];
        o[d] = o[d] + pv;
      }
    }
  }
}

}  // namespace

// The f32 store's SIMD head kernel (attention_head.h) must keep the plain loop's bits: the CPU
// engine's exact mode is the reference other backends are held to.
TEST_CASE("CPU attention: f32 KV decode equals the plain per-key loop bit for bit, through a ring", "[attention]") {
  Rng rng(7);
  for (const int64_t win : {int64_t(0), int64_t(40)}) {
    const int64_t cap = win ? win + 8 : 300;
    const std::vector<float> k = random_values(size_t(cap * kWidth), rng), v = random_values(size_t(cap * kWidth), rng);
    const std::vector<float> q = random_values(size_t(kHeads * kHd), rng);
    const KvStore kv{k.data(), v.data(), GgmlType::F32, GgmlType::F32, cap};
    const AttentionShape shape{kHeads, kHeadsKv, kHd, win, 0.125f};
    for (const int32_t pos : {0, 1, 37, 47, 113, 250}) {
      std::vector<float> got(size_t(kHeads * kHd), NAN), want(got.size());
      attention(q.data(), &pos, 1, kv, shape, got.data());
      plain_attention(q.data(), pos, k.data(), v.data(), cap, win, 0.125f, want.data());
      INFO("window " << win << " pos " << pos);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
  }
}

// The rows-at-once path (attention_head.h attend_rows_avx512: a KV head's query heads, of one or
// several queries, reading each key once) against the per-(query, head) path: the same bits for
// every row, over GQA groups of 1..8, head sizes with and without a 64-wide stripe, f32, f16, Q8_0
// and Q4_1 K and V, verify-shaped calls (consecutive positions) and scattered ones, sliding windows through a
// ring, tree masks and the int8 output. Where the CPU lacks AVX-512 both calls take the per-row
// path (then equal trivially).
namespace {

struct RowsCase {
  int64_t heads, heads_kv, hd, win, n_q;
  GgmlType k_type, v_type;
  bool scattered, tree;
};

// cap slots of width random values in the KV type's rows (quantised by its reference quantiser).
std::vector<uint8_t> kv_rows(GgmlType t, int64_t cap, int64_t width, Rng& rng) {
  const auto f = random_values(size_t(cap * width), rng);
  const size_t row = ggml_row_bytes(t, uint64_t(width));
  std::vector<uint8_t> out(size_t(cap) * row);
  for (int64_t i = 0; i < cap; ++i) {
    const float* src = f.data() + i * width;
    uint8_t* dst = out.data() + size_t(i) * row;
    if (t == GgmlType::F32) {
      std::memcpy(dst, src, row);
    } else {
      quant_kernels(t)->quantize(src, dst, width);
    }
  }
  return out;
}

void check_rows_path(const RowsCase& c, Rng& rng) {
  const int64_t width = c.heads_kv * c.hd, cap = c.win ? c.win + 16 : 400;
  const auto k = kv_rows(c.k_type, cap, width, rng), v = kv_rows(c.v_type, cap, width, rng);
  const KvStore kv{k.data(), v.data(), c.k_type, c.v_type, cap};
  const AttentionShape s{c.heads, c.heads_kv, c.hd, c.win, 0.1f};
  const auto q = random_values(size_t(c.n_q * c.heads * c.hd), rng);
  const int32_t last = int32_t(c.win ? 300 : cap - 1), first = last - int32_t(c.n_q) + 1;
  std::vector<int32_t> pos;
  std::vector<uint64_t> bits;
  for (int64_t i = 0; i < c.n_q; ++i) {
    pos.push_back(c.scattered ? int32_t(rng.next_u32() % uint32_t(last + 1)) : first + int32_t(i));
    bits.push_back(rng.next_u64() | 1u);
  }
  const size_t n_out = size_t(c.n_q * c.heads * c.hd), q8_bytes = q8_act_bytes(c.heads * c.hd, c.n_q);
  const bool q8 = c.hd % 32 == 0 && !c.tree;
  auto run = [&](bool rows, std::vector<float>& out, std::vector<uint8_t>& out8) {
    out.assign(n_out, NAN);
    out8.assign(q8_bytes + 64, 0);
    void* o8 = q8 ? reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(out8.data()) + 63) & ~uintptr_t(63)) : nullptr;
    set_attention_rows(rows);
    if (c.tree)
      attention_tree(q.data(), pos.data(), c.n_q, kv, s, TreeMask{bits.data(), first}, out.data());
    else
      attention(q.data(), pos.data(), c.n_q, kv, s, out.data(), o8);
    set_attention_rows(true);
    return o8;
  };
  std::vector<float> want, got;
  std::vector<uint8_t> want8, got8;
  const void* w8 = run(false, want, want8);
  const void* g8 = run(true, got, got8);
  CHECK(std::memcmp(got.data(), want.data(), n_out * sizeof(float)) == 0);
  if (q8) CHECK(std::memcmp(g8, w8, q8_bytes) == 0);
}

}  // namespace

TEST_CASE("CPU attention: a KV head's rows computed together keep every row's bits", "[attention]") {
  Rng rng(31);
  constexpr GgmlType kTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1};
  struct Shape { int64_t heads, heads_kv, hd; };
  for (const Shape sh : {Shape{8, 2, 64}, Shape{4, 4, 128}, Shape{8, 1, 32}, Shape{16, 2, 256}, Shape{6, 3, 96}})
    for (const int64_t win : {int64_t(0), int64_t(33)})
      for (const GgmlType kt : kTypes)
        for (const GgmlType vt : kTypes)
          for (const int64_t n_q : {int64_t(1), int64_t(3), int64_t(9)})
            for (const int mode : {0, 1, 2}) {  // consecutive, scattered, tree
              const RowsCase c{sh.heads, sh.heads_kv, sh.hd, win, n_q, kt, vt, mode == 1, mode == 2};
              INFO("heads " << c.heads << "/" << c.heads_kv << " x " << c.hd << ", K " << ggml_type_info(kt).name
                            << ", V " << ggml_type_info(vt).name << ", window " << win << ", " << n_q << " queries, "
                            << (mode == 0 ? "consecutive" : mode == 1 ? "scattered" : "tree"));
              check_rows_path(c, rng);
            }
}
