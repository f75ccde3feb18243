// Token-tree visibility masks in flash-decoding attention (kernels/cuda/attention_tree.h, M12's
// verification of a drafted tree) against the CPU reference with the same mask
// (kernels/cpu/attention_tree.h): random trees of 8 and 64 tokens over f16, q8 and q4 KV, GQA
// 1..8, head dims 32..256, full causal and sliding windows in rings. Also: a query run alone with
// its own mask word is bit-identical to its row of the call, and the chain mask (every token sees
// all earlier new tokens) gives the bits of the call without a mask. Skips without a GPU.
//
// Tolerance: as test_cuda_attention_decode.cpp, |gpu - cpu| <= 2e-5 + 1e-3 sum p |v|
// (attention_test_util.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "attention_test_util.h"
#include "cuda_test_util.h"
#include "kernels/cpu/attention_tree.h"
#include "kernels/cuda/attention_tree.h"
#include "kv/kv_quant.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::test;
namespace kc = strata::kernels::cuda;
namespace cpu = strata::kernels::cpu;

struct TreeCase {
  int64_t head_dim = 128, n_head_kv = 2, group = 2, window = 0, capacity = 0, n_head = 0, row = 0;
  GgmlType type = GgmlType::F16;
  int32_t first = 0;
  std::vector<int32_t> pos;
  std::vector<uint64_t> bits;
  std::vector<uint8_t> k, v;
  std::vector<float> q;

  std::string describe() const {
    return fmt::format("head_dim {} n_head_kv {} group {} window {} capacity {} KV {} n_q {} first {}", head_dim,
                       n_head_kv, group, window, capacity, kv::kv_type_name(type), pos.size(), first);
  }
  kc::AttentionShapeDev shape() const {
    return {n_head, n_head_kv, head_dim, window, 1.0f / std::sqrt(float(head_dim))};
  }
};

// A random tree of n tokens in topological order: token i's parent is a random earlier token
// or none (a child of the prefix); its mask holds its ancestors and itself.
std::vector<uint64_t> random_tree(int64_t n, Rng& rng) {
  std::vector<uint64_t> bits(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t parent = int64_t(rng.next_u64() % uint64_t(i + 1)) - 1;  // -1 .. i - 1
    bits[size_t(i)] = (parent >= 0 ? bits[size_t(parent)] : 0) | (uint64_t(1) << i);
  }
  return bits;
}

TreeCase make_tree_case(GgmlType t, int64_t n_q, Rng& rng) {
  TreeCase c;
  c.head_dim = std::array<int64_t, 4>{32, 64, 128, 256}[rng.next_u64() % 4];
  c.group = int64_t(1) << (rng.next_u64() % 4);
  c.n_head_kv = c.group >= 4 ? 2 : 3;
  c.n_head = c.n_head_kv * c.group;
  c.row = c.n_head * c.head_dim;
  c.type = t;
  c.window = rng.uniform() < 0.5f ? 0 : 700;
  c.first = int32_t(300 + rng.next_u64() % 6000);
  for (int64_t i = 0; i < n_q; ++i) c.pos.push_back(c.first + int32_t(i));
  c.capacity = c.window > 0 ? c.window + n_q - 1 + int64_t(rng.next_u64() % 8) : c.first + n_q + int64_t(rng.next_u64() % 5);
  c.bits = random_tree(n_q, rng);
  const int64_t width = c.n_head_kv * c.head_dim;
  c.k = random_kv_store(t, c.capacity, width, rng);
  c.v = random_kv_store(t, c.capacity, width, rng);
  c.q = random_normal(size_t(n_q * c.row), rng, 3.0f);
  return c;
}

// Queries [first, first + n) of the case in one call, with their mask words (or none).
std::vector<float> gpu_run(const TreeCase& c, size_t first, size_t n, const std::vector<uint64_t>* bits) {
  std::vector<float> qs(c.q.begin() + long(first * size_t(c.row)), c.q.begin() + long((first + n) * size_t(c.row)));
  std::vector<int32_t> ps(c.pos.begin() + long(first), c.pos.begin() + long(first + n));
  DevBuf dk = to_device(c.k), dv = to_device(c.v), dq = to_device(qs), dpos = to_device(ps), dout(qs.size() * 4);
  dout.poison();
  const kc::AttentionShapeDev s = c.shape();
  const size_t ws_bytes = kc::attention_workspace_bytes(int64_t(n), s, c.capacity);
  DevBuf ws(ws_bytes);
  ws.poison();  // partials unwritten by the kernel fail; the counters must start at zero
  const kc::Workspace w{ws_bytes ? ws.as<void>() : nullptr, ws_bytes};
  REQUIRE(kc::attention_workspace_clear(w, nullptr));
  const kc::KvStoreDev kv{dk.as<void>(), dv.as<void>(), c.type, c.type, c.capacity};
  std::vector<uint64_t> words;
  if (bits) words.assign(bits->begin() + long(first), bits->begin() + long(first + n));
  DevBuf dbits(std::max<size_t>(words.size(), 1) * 8);
  if (bits) CUDA_REQUIRE(cudaMemcpy(dbits.as<void>(), words.data(), words.size() * 8, cudaMemcpyHostToDevice));
  const kc::TreeMaskDev tree{bits ? dbits.as<uint64_t>() : nullptr, c.first};
  REQUIRE(kc::attention_tree(dq.as<float>(), dpos.as<int32_t>(), int64_t(n), kv, s, tree, dout.as<float>(), w, nullptr));
  return dout.download<float>(qs.size());
}

AttentionRef cpu_run(const TreeCase& c) {
  AttentionRef ref{std::vector<float>(c.q.size()), std::vector<float>(c.q.size())};
  const cpu::KvStore ckv{c.k.data(), c.v.data(), c.type, c.type, c.capacity};
  const cpu::AttentionShape cs{c.n_head, c.n_head_kv, c.head_dim, c.window, 1.0f / std::sqrt(float(c.head_dim))};
  const cpu::TreeMask tree{c.bits.data(), c.first};
  cpu::attention_tree(c.q.data(), c.pos.data(), int64_t(c.pos.size()), ckv, cs, tree, ref.out.data());
  const MagnitudeKv m = magnitude_kv(c.type, c.k, c.type, c.v, c.capacity, c.n_head_kv * c.head_dim);
  const cpu::KvStore mkv{m.k.data(), m.v.data(), GgmlType::F32, GgmlType::F32, c.capacity};
  cpu::attention_tree(c.q.data(), c.pos.data(), int64_t(c.pos.size()), mkv, cs, tree, ref.magnitude.data());
  return ref;
}

constexpr GgmlType kTypes[] = {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1};

}  // namespace

TEST_CASE("decode attention with a token-tree mask matches the CPU with the same mask", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const GgmlType t : kTypes) {
    for (const int64_t n_q : {8, 64}) {
      const TreeCase c = make_tree_case(t, n_q, rng);
      INFO(c.describe());
      const std::vector<float> all = gpu_run(c, 0, c.pos.size(), &c.bits);
      check_decode_attention_close(all, cpu_run(c));
      // A query alone with its own mask word: its row of the call, bit for bit.
      for (size_t i : {size_t(0), size_t(n_q / 2), size_t(n_q - 1)}) {
        const std::vector<float> one = gpu_run(c, i, 1, &c.bits);
        INFO("query " << i);
        REQUIRE(std::memcmp(one.data(), all.data() + i * size_t(c.row), one.size() * 4) == 0);
      }
    }
  }
}

TEST_CASE("decode attention: the chain tree mask equals no mask, bit for bit", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const GgmlType t : kTypes) {
    TreeCase c = make_tree_case(t, 16, rng);
    for (size_t i = 0; i < c.bits.size(); ++i) c.bits[i] = (uint64_t(2) << i) - 1;  // tokens 0..i
    INFO(c.describe());
    const std::vector<float> masked = gpu_run(c, 0, c.pos.size(), &c.bits);
    const std::vector<float> plain = gpu_run(c, 0, c.pos.size(), nullptr);
    REQUIRE(std::memcmp(masked.data(), plain.data(), plain.size() * 4) == 0);
  }
}

// Tree paths (attention_tree.h TreePathDev), as the CUDA engine's eval_tree runs them: one call
// for all the nodes of a step must give each node the bits of its own one-query call (each block
// holds one node's rows), over every KV type, GQA 1..8, head dims 32..256, windows in rings.
TEST_CASE("decode attention: tree paths in one call equal one call per node, bit for bit", "[gpu][attention][tree]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  constexpr int32_t kStride = 16;
  for (const GgmlType t : kTypes) {
    for (const int64_t n : {3, 16}) {
      TreeCase c = make_tree_case(t, n, rng);
      // Node q at depth d_q < n: its query at first + d_q, its path's d_q + 1 keys from the slots
      // of nodes j < n (any of them: the kernel only remaps where it reads).
      std::vector<int32_t> path_n(static_cast<size_t>(n)), slots(static_cast<size_t>(n * kStride));
      for (int64_t q = 0; q < n; ++q) {
        const int32_t d = int32_t(rng.next_u64() % uint64_t(n));
        path_n[size_t(q)] = d + 1;
        c.pos[size_t(q)] = c.first + d;
        for (int32_t k = 0; k <= d; ++k) slots[size_t(q * kStride + k)] = int32_t(rng.next_u64() % uint64_t(n));
      }
      INFO(c.describe());
      DevBuf dk = to_device(c.k), dv = to_device(c.v), dq = to_device(c.q), dpos = to_device(c.pos),
             dn = to_device(path_n), dslots = to_device(slots), dall(c.q.size() * 4), done(size_t(c.row) * 4);
      dall.poison();
      const kc::AttentionShapeDev s = c.shape();
      const size_t ws_bytes = kc::attention_workspace_bytes(n, s, c.capacity);
      DevBuf ws(ws_bytes);
      ws.poison();
      const kc::Workspace w{ws_bytes ? ws.as<void>() : nullptr, ws_bytes};
      REQUIRE(kc::attention_workspace_clear(w, nullptr));
      const kc::KvStoreDev kv{dk.as<void>(), dv.as<void>(), c.type, c.type, c.capacity};
      REQUIRE(kc::attention_tree_path(dq.as<float>(), dpos.as<int32_t>(), n, kv, s,
                                      {dslots.as<int32_t>(), dn.as<int32_t>(), kStride}, dall.as<float>(), w, nullptr));
      const std::vector<float> all = dall.download<float>(c.q.size());
      for (int64_t q = 0; q < n; ++q) {
        INFO("node " << q << " depth " << path_n[size_t(q)] - 1);
        done.poison();
        REQUIRE(kc::attention_tree_path(dq.as<float>() + q * c.row, dpos.as<int32_t>() + q, 1, kv, s,
                                        {dslots.as<int32_t>() + q * kStride, dn.as<int32_t>() + q}, done.as<float>(),
                                        w, nullptr));
        const std::vector<float> one = done.download<float>(size_t(c.row));
        REQUIRE(std::memcmp(one.data(), all.data() + q * c.row, one.size() * 4) == 0);
      }
    }
  }
  // A path call with more than one query needs the stride; a null path is refused.
  DevBuf d(64);
  const kc::KvStoreDev kv{d.as<void>(), d.as<void>(), GgmlType::F16, GgmlType::F16, 4};
  const kc::AttentionShapeDev s{2, 1, 32, 0, 1.0f};
  CHECK_FALSE(kc::attention_tree_path(d.as<float>(), d.as<int32_t>(), 2, kv, s, {d.as<int32_t>(), d.as<int32_t>(), 0},
                                      d.as<float>(), {}, nullptr));
  CHECK_FALSE(kc::attention_tree_path(d.as<float>(), d.as<int32_t>(), 1, kv, s, {}, d.as<float>(), {}, nullptr));
}
