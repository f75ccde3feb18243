// Attention sinks + window (kernels/cpu/attention.h AttentionShape::sinks, a drafter's window):
// a row at position p sees keys [0, sinks) and [p - window + 1, p] and nothing else. Checked two
// ways: bit for bit against plain causal attention over a store that holds only the row's visible
// keys, in order (every KV type, GQA, 1..16 queries in one call), and against a double-precision
// softmax over the decoded visible keys (so a wrong visible set cannot hide behind a shared path).
// The tree mask keeps its meaning inside the window: a chain mask is plain windowed attention.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_tree.h"
#include "kernels/cpu/quant_kernels.h"

namespace {

using namespace strata;
using namespace strata::kernels::cpu;

std::vector<float> random_values(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(double(rng.next_u64() >> 11) * 0x1p-53 * 2.0 - 1.0);
  return v;
}

// One store of `slots` rows of n_head_kv * head_dim values in type t (random f32, quantised).
struct Store {
  GgmlType type;
  int64_t width, row_bytes;
  std::vector<uint8_t> bytes;
  Store(GgmlType t, int64_t slots, int64_t w, Rng& rng)
      : type(t), width(w), row_bytes(int64_t(ggml_row_bytes(t, uint64_t(w)))), bytes(size_t(slots * row_bytes)) {
    const auto f = random_values(size_t(slots * w), rng);
    const auto* k = quant_kernels(t);
    for (int64_t s = 0; s < slots; ++s) k->quantize(f.data() + s * w, bytes.data() + s * row_bytes, w);
  }
  // The rows of `keys`, in order, as a store of keys.size() slots.
  Store pick(const std::vector<int64_t>& keys) const {
    Store out = *this;
    out.bytes.assign(keys.size() * size_t(row_bytes), 0);
    for (size_t j = 0; j < keys.size(); ++j)
      std::memcpy(out.bytes.data() + j * size_t(row_bytes), bytes.data() + keys[j] * row_bytes, size_t(row_bytes));
    return out;
  }
  std::vector<float> decoded(int64_t slot) const {
    std::vector<float> r(static_cast<size_t>(width));
    quant_kernels(type)->dequantize(bytes.data() + slot * row_bytes, r.data(), width);
    return r;
  }
};

std::vector<int64_t> visible(int64_t pos, int64_t window, int64_t sinks) {
  std::vector<int64_t> keys;
  for (int64_t j = 0; j <= pos; ++j)
    if (j > pos - window || j < sinks) keys.push_back(j);
  return keys;
}

struct Case {
  GgmlType k, v;
  int64_t n_head, n_head_kv, head_dim, window, sinks, n_q;
};

}  // namespace

TEST_CASE("CPU attention with sinks: each row is plain attention over exactly its visible keys", "[attention]") {
  const Case cases[] = {
      {GgmlType::F32, GgmlType::F32, 4, 2, 64, 48, 4, 1},     // the AVX-512 head path where there is one
      {GgmlType::F32, GgmlType::F32, 8, 2, 128, 64, 16, 16},  // 16 queries of one call
      {GgmlType::F16, GgmlType::F16, 4, 1, 64, 32, 8, 5},
      {GgmlType::Q8_0, GgmlType::Q8_0, 4, 2, 64, 100, 7, 3},
      {GgmlType::Q4_1, GgmlType::Q4_1, 2, 2, 32, 16, 1, 8},
      {GgmlType::Q8_0, GgmlType::Q4_1, 8, 4, 128, 40, 64, 2},  // more sinks than the first row's cut
      {GgmlType::F16, GgmlType::Q8_0, 4, 2, 64, 300, 32, 4},   // a window longer than the context: no cut
  };
  Rng rng(41);
  for (const Case& c : cases) {
    const int64_t width = c.n_head_kv * c.head_dim, slots = 320, row = c.n_head * c.head_dim;
    INFO(ggml_type_info(c.k).name << "/" << ggml_type_info(c.v).name << " heads " << c.n_head << "/" << c.n_head_kv
                                  << " hd " << c.head_dim << " window " << c.window << " sinks " << c.sinks
                                  << " n_q " << c.n_q);
    const Store K(c.k, slots, width, rng), V(c.v, slots, width, rng);
    const auto q = random_values(size_t(c.n_q * row), rng);
    std::vector<int32_t> pos;
    for (int64_t i = 0; i < c.n_q; ++i) pos.push_back(int32_t(slots - c.n_q + i - 7));  // not the last slots
    const AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, c.window, 0.125f, c.sinks};
    std::vector<float> out(q.size(), NAN);
    attention(q.data(), pos.data(), c.n_q, KvStore{K.bytes.data(), V.bytes.data(), c.k, c.v, slots}, s, out.data());
    for (int64_t i = 0; i < c.n_q; ++i) {
      const auto keys = visible(pos[size_t(i)], c.window, c.sinks);
      const Store k = K.pick(keys), v = V.pick(keys);
      // Bit for bit: the same kernels over a store of the visible keys alone, full causal.
      const int32_t last = int32_t(keys.size()) - 1;
      std::vector<float> ref(size_t(row), NAN);
      const AttentionShape full{c.n_head, c.n_head_kv, c.head_dim, 0, 0.125f};
      attention(q.data() + i * row, &last, 1, KvStore{k.bytes.data(), v.bytes.data(), c.k, c.v, int64_t(keys.size())},
                full, ref.data());
      INFO("query " << i << " at " << pos[size_t(i)] << ": " << keys.size() << " visible keys");
      CHECK(std::memcmp(ref.data(), out.data() + i * row, size_t(row) * 4) == 0);
      // And the definition, in doubles over the decoded keys.
      const int64_t group = c.n_head / c.n_head_kv;
      double worst = 0;
      for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t off = (h / group) * c.head_dim;
        std::vector<double> sc(keys.size());
        double mx = -INFINITY, den = 0;
        for (size_t j = 0; j < keys.size(); ++j) {
          const auto kr = k.decoded(int64_t(j));
          double d = 0;
          for (int64_t e = 0; e < c.head_dim; ++e) d += double(q[size_t(i * row + h * c.head_dim + e)]) * kr[size_t(off + e)];
          sc[j] = d * 0.125;
          mx = std::max(mx, sc[j]);
        }
        for (auto& x : sc) den += (x = std::exp(x - mx));
        for (int64_t e = 0; e < c.head_dim; ++e) {
          double o = 0;
          for (size_t j = 0; j < keys.size(); ++j) o += sc[j] / den * v.decoded(int64_t(j))[size_t(off + e)];
          worst = std::max(worst, std::abs(o - double(out[size_t(i * row + h * c.head_dim + e)])));
        }
      }
      CHECK(worst < 1e-5);
    }
  }
}

TEST_CASE("CPU attention with sinks: nothing between the sinks and the window reaches a row", "[attention]") {
  // Moving V of a key a row does not see leaves it unchanged; moving a sink or a recent key does not.
  Rng rng(42);
  const int64_t hd = 64, width = hd, slots = 200, window = 32, sinks = 4;
  Store K(GgmlType::F16, slots, width, rng), V(GgmlType::F16, slots, width, rng);
  const auto q = random_values(size_t(2 * hd), rng);
  const int32_t pos = 150;
  const AttentionShape s{2, 1, hd, window, 0.125f, sinks};
  auto run = [&](const Store& v) {
    std::vector<float> out(size_t(2 * hd));
    attention(q.data(), &pos, 1, KvStore{K.bytes.data(), v.bytes.data(), GgmlType::F16, GgmlType::F16, slots}, s,
              out.data());
    return out;
  };
  const auto base = run(V);
  for (const int64_t key : {int64_t(0), sinks - 1, sinks, int64_t(pos) - window, int64_t(pos) - window + 1,
                            int64_t(pos), int64_t(pos) + 1}) {
    Store moved = V;
    const std::vector<float> ones(size_t(width), 1.0f);
    quant_kernels(GgmlType::F16)->quantize(ones.data(), moved.bytes.data() + key * V.row_bytes, width);
    const bool seen = key <= pos && (key < sinks || key > pos - window);
    INFO("key " << key);
    CHECK((std::memcmp(run(moved).data(), base.data(), base.size() * 4) != 0) == seen);
  }
}

TEST_CASE("CPU attention with sinks: a chain tree mask is plain windowed attention, bit for bit", "[attention]") {
  Rng rng(43);
  const int64_t hd = 64, heads = 4, heads_kv = 2, width = heads_kv * hd, first = 180, n = 9;
  const Store K(GgmlType::Q8_0, first + n, width, rng), V(GgmlType::F32, first + n, width, rng);
  const auto q = random_values(size_t(n * heads * hd), rng);
  std::vector<int32_t> pos;
  std::vector<uint64_t> chain;
  for (int64_t i = 0; i < n; ++i) pos.push_back(int32_t(first + i)), chain.push_back((uint64_t(2) << i) - 1);
  const AttentionShape s{heads, heads_kv, hd, 24, 0.125f, 8};
  const KvStore kv{K.bytes.data(), V.bytes.data(), GgmlType::Q8_0, GgmlType::F32, first + n};
  std::vector<float> a(q.size()), b(q.size());
  attention_tree(q.data(), pos.data(), n, kv, s, TreeMask{chain.data(), int32_t(first)}, a.data());
  attention(q.data(), pos.data(), n, kv, s, b.data());
  CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}
