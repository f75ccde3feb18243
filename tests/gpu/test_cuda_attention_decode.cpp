// The flash-decoding attention kernel (kernels/cuda/attention_decode.cu, 1..64 queries over f16,
// Q8_0 and Q4_1 KV) against the CPU reference (kernels/cpu/attention.h): 1, 2, 8 and 64 queries,
// GQA 1..8, head dims 32..256, full causal and sliding windows in ring stores whose positions
// wrap, key counts that are no multiple of the 256-key split or the key tile, and long contexts
// (33000 keys: 17 chunks of 2048), and q4/q8 stores far from zero. Also: a row of a k-query call
// is bit-identical to the query run alone (verification == decode), the same call twice gives the
// same bits, calls of other shapes on one workspace (eager and graph replays) do not disturb the
// split merge, and an unsplit call (no workspace) is still right. Skips without a GPU.
//
// Tolerance: as test_cuda_attention.cpp's f32 kernel (exact f32 products of the same decoded K/V
// values, different summation orders): |gpu - cpu| <= 2e-5 + 1e-3 sum p |v| (attention_test_util.h);
// q * 3 makes the softmax peaked, so one wrong key, slot or chunk merge moves outputs by ~1e-2 or more.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "attention_test_util.h"
#include "cuda_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/act_round.h"
#include "kernels/cuda/attention_decode.h"
#include "kernels/cuda/cuda_api.h"
#include "kv/kv_quant.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::test;
namespace kc = strata::kernels::cuda;
namespace cpu = strata::kernels::cpu;

struct Case {
  int64_t head_dim = 128, n_head_kv = 2, group = 2, window = 0, capacity = 0;
  GgmlType k_dtype = GgmlType::F16, v_dtype = GgmlType::F16;
  std::vector<int32_t> pos;
};

std::vector<int32_t> consecutive(int32_t first, int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = first + int32_t(i);
  return p;
}

// A case's store and queries on the device, and a way to run the GPU kernel on any subset of
// the queries (by index) with or without a workspace.
struct Fixture {
  Case c;
  int64_t n_head = 0, width = 0, row = 0;  // row: floats per query
  std::vector<uint8_t> k, v;
  std::vector<float> q;
  DevBuf dk, dv;
  kc::AttentionShapeDev s{};
  kc::KvStoreDev kv{};

  Fixture(const Case& c_, Rng& rng)
      : c(c_), n_head(c_.n_head_kv * c_.group), width(c_.n_head_kv * c_.head_dim), row(n_head * c_.head_dim),
        k(random_kv_store(c_.k_dtype, c_.capacity, width, rng)), v(random_kv_store(c_.v_dtype, c_.capacity, width, rng)),
        q(random_normal(c_.pos.size() * size_t(row), rng, 3.0f)), dk(to_device(k)), dv(to_device(v)) {
    s.n_head = n_head;
    s.n_head_kv = c.n_head_kv;
    s.head_dim = c.head_dim;
    s.window = c.window;
    s.scale = 1.0f / std::sqrt(float(c.head_dim));
    kv = {dk.as<void>(), dv.as<void>(), c.k_dtype, c.v_dtype, c.capacity};
  }

  // Queries [first, first + n) in one call.
  std::vector<float> gpu(size_t first, size_t n, bool workspace = true) {
    std::vector<float> qs(q.begin() + long(first * size_t(row)), q.begin() + long((first + n) * size_t(row)));
    std::vector<int32_t> ps(c.pos.begin() + long(first), c.pos.begin() + long(first + n));
    DevBuf dq = to_device(qs), dpos = to_device(ps), dout(qs.size() * 4);
    dout.poison();
    const int32_t max_pos = *std::max_element(c.pos.begin(), c.pos.end());
    const size_t ws_bytes = workspace ? kc::attention_workspace_bytes(int64_t(n), s, std::max<int64_t>(c.capacity, max_pos + 1)) : 0;
    DevBuf ws(ws_bytes);
    ws.poison();  // partials unwritten by the kernel fail; the counters must start at zero
    const kc::Workspace w{ws_bytes ? ws.as<void>() : nullptr, ws_bytes};
    REQUIRE(kc::attention_workspace_clear(w, nullptr));
    REQUIRE(kc::attention(dq.as<float>(), dpos.as<int32_t>(), int64_t(n), kv, s, dout.as<float>(), w, nullptr));
    return dout.download<float>(qs.size());
  }

  AttentionRef reference() const {
    AttentionRef ref{std::vector<float>(q.size()), std::vector<float>(q.size())};
    const cpu::AttentionShape cs{n_head, c.n_head_kv, c.head_dim, c.window, s.scale};
    const cpu::KvStore ckv{k.data(), v.data(), c.k_dtype, c.v_dtype, c.capacity};
    cpu::attention(q.data(), c.pos.data(), int64_t(c.pos.size()), ckv, cs, ref.out.data());
    const MagnitudeKv m = magnitude_kv(c.k_dtype, k, c.v_dtype, v, c.capacity, width);
    const cpu::KvStore mkv{m.k.data(), m.v.data(), GgmlType::F32, GgmlType::F32, c.capacity};
    cpu::attention(q.data(), c.pos.data(), int64_t(c.pos.size()), mkv, cs, ref.magnitude.data());
    return ref;
  }

  std::string describe() const {
    return fmt::format("head_dim {} n_head_kv {} group {} window {} capacity {} K {} V {} n_q {} pos {}..{}", c.head_dim,
                       c.n_head_kv, c.group, c.window, c.capacity, kv::kv_type_name(c.k_dtype),
                       kv::kv_type_name(c.v_dtype), c.pos.size(), c.pos.front(), c.pos.back());
  }
};

// n_q queries ending at `last`; a ring of window + n_q - 1 + margin slots for windows (positions
// wrap when last is large), else capacity last + 1 + margin.
Case make_case(int64_t hd, int64_t group, int64_t window, GgmlType kt, GgmlType vt, int64_t n_q, int32_t last,
               Rng& rng) {
  Case c;
  c.head_dim = hd;
  c.group = group;
  c.n_head_kv = group >= 4 ? 2 : 3;  // odd KV-head counts: slices at every alignment
  c.window = window;
  c.k_dtype = kt;
  c.v_dtype = vt;
  c.pos = consecutive(last - int32_t(n_q) + 1, n_q);
  c.capacity = window > 0 ? window + n_q - 1 + int64_t(rng.next_u64() % 8) : int64_t(last) + 1 + int64_t(rng.next_u64() % 5);
  return c;
}

constexpr GgmlType kTypes[] = {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1};

}  // namespace

TEST_CASE("decode attention: 1, 2, 8 and 64 queries over f16, q8 and q4 KV match the CPU", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const GgmlType t : kTypes) {
    for (const int64_t n_q : {1, 2, 8, 64}) {
      for (const int64_t window : {int64_t(0), int64_t(16), int64_t(700)}) {
        const int64_t hd = std::array<int64_t, 4>{32, 64, 128, 256}[rng.next_u64() % 4];
        const int64_t group = int64_t(1) << (rng.next_u64() % 4);  // 1, 2, 4, 8
        // Short contexts (fewer keys than a tile or a chunk) sometimes, else up to ~6000 keys;
        // never a multiple of the chunk on purpose.
        const int32_t last = rng.uniform() < 0.25f ? int32_t(n_q - 1 + rng.next_u64() % 50)
                                                   : int32_t(300 + rng.next_u64() % 6000);
        Fixture f(make_case(hd, group, window, t, t, n_q, std::max<int32_t>(last, int32_t(n_q - 1)), rng), rng);
        INFO(f.describe());
        check_decode_attention_close(f.gpu(0, f.c.pos.size()), f.reference());
      }
    }
  }
}

TEST_CASE("decode attention: long contexts and mixed K/V types match the CPU", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  // 33000 keys (17 chunks of 2048, the last partial), 1..8 queries; a 5000-key window in a ring
  // whose positions wrap several times.
  for (const GgmlType t : kTypes) {
    for (const int64_t n_q : {1, 8}) {
      Fixture f(make_case(128, 2, 0, t, t, n_q, 32999, rng), rng);
      INFO(f.describe());
      check_decode_attention_close(f.gpu(0, f.c.pos.size()), f.reference());
    }
    Fixture w(make_case(64, 4, 5000, t, t, 2, 40000 + int32_t(rng.next_u64() % 1000), rng), rng);
    INFO(w.describe());
    check_decode_attention_close(w.gpu(0, w.c.pos.size()), w.reference());
  }
  const std::pair<GgmlType, GgmlType> mixed[] = {{GgmlType::Q8_0, GgmlType::Q4_1},
                                                 {GgmlType::F16, GgmlType::Q4_1},
                                                 {GgmlType::Q4_1, GgmlType::F16}};
  for (const auto& [kt, vt] : mixed) {
    Fixture f(make_case(128, 2, rng.uniform() < 0.5f ? 0 : 100, kt, vt, 3, 2000 + int32_t(rng.next_u64() % 3000), rng), rng);
    INFO(f.describe());
    check_decode_attention_close(f.gpu(0, f.c.pos.size()), f.reference());
  }
}

TEST_CASE("decode attention: a row of a k-query call equals the query run alone, bit for bit", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const GgmlType t : kTypes) {
    for (const int64_t n_q : {2, 8, 64}) {
      // Long enough for several chunks; windows whose start crosses chunk boundaries within the call.
      const int64_t window = rng.uniform() < 0.5f ? 0 : 300 + int64_t(rng.next_u64() % 600);
      const int32_t last = int32_t(2000 + rng.next_u64() % 20000);
      Fixture f(make_case(128, int64_t(1) << (rng.next_u64() % 3), window, t, t, n_q, last, rng), rng);
      INFO(f.describe());
      const std::vector<float> all = f.gpu(0, f.c.pos.size());
      for (size_t i = 0; i < f.c.pos.size(); ++i) {
        const std::vector<float> one = f.gpu(i, 1);
        INFO("query " << i << " at " << f.c.pos[i]);
        REQUIRE(std::memcmp(one.data(), all.data() + i * size_t(f.row), one.size() * 4) == 0);
      }
      // The same call again: the same bits (fixed reduction order, no float atomics).
      const std::vector<float> again = f.gpu(0, f.c.pos.size());
      REQUIRE(std::memcmp(again.data(), all.data(), all.size() * 4) == 0);
    }
  }
}

TEST_CASE("decode attention without a workspace runs unsplit and matches the CPU", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const GgmlType t : kTypes) {
    Fixture f(make_case(64, 2, t == GgmlType::Q8_0 ? 40 : 0, t, t, 4, 3000 + int32_t(rng.next_u64() % 1000), rng), rng);
    INFO(f.describe());
    check_decode_attention_close(f.gpu(0, f.c.pos.size(), false), f.reference());
  }
}

// q4 codes are decoded as 0.5 + n / 256 with the block's offset m shifted by -128 d (the kernel
// folds the per-value subtract into m once per key): K and V rows far from zero (means +-2 and 6,
// so m and 128 d are far apart and the shifted sums cancel more) still match the CPU at every
// head dim, split and unsplit; q8 alongside (its codes decode exactly).
TEST_CASE("decode attention: q4 and q8 stores with values far from zero match the CPU", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  auto offset_store = [&](GgmlType t, int64_t capacity, int64_t width, float mean) {
    const size_t row = kv::kv_row_bytes(t, uint32_t(width));
    std::vector<uint8_t> buf(size_t(capacity) * row);
    for (int64_t slot = 0; slot < capacity; ++slot) {
      auto x = random_normal(size_t(width), rng);
      for (size_t i = 0; i < x.size(); ++i) x[i] += (i / 32) % 2 ? mean : -mean / 3.0f;
      kv::kv_quantize_row(t, x.data(), buf.data() + size_t(slot) * row, uint32_t(width));
    }
    return buf;
  };
  for (const GgmlType t : {GgmlType::Q4_1, GgmlType::Q8_0}) {
    for (const int64_t hd : {32, 64, 128, 256}) {
      for (const bool split : {true, false}) {
        Fixture f(make_case(hd, 2, 0, t, t, 2, 1500 + int32_t(rng.next_u64() % 1500), rng), rng);
        f.k = offset_store(t, f.c.capacity, f.width, 2.0f);
        f.v = offset_store(t, f.c.capacity, f.width, 6.0f);
        f.dk.upload(f.k);  // same sizes as the fixture's N(0, 1) stores
        f.dv.upload(f.v);
        INFO(f.describe() << (split ? " split" : " unsplit"));
        check_decode_attention_close(f.gpu(0, f.c.pos.size(), split), f.reference());
      }
    }
  }
}

// A split call merges its chunks in the block that finishes last in each (row tile, KV head)
// column, counted on a counter at the end of the workspace that every call leaves at zero
// (attention_decode.cu). Calls of different head dims, query counts, groups, windows, KV types and
// split counts on one shared workspace, back to back without synchronising, then the same
// sequence captured as a CUDA graph and replayed three times: every output has the bits of the
// call on a fresh workspace (a counter left nonzero would skip or misplace a merge: poisoned or
// stale outputs), and the counters end at zero.
TEST_CASE("decode attention: split calls sharing one workspace give the same bits, eagerly and in graph replays",
          "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  std::vector<std::unique_ptr<Fixture>> fs;
  auto add = [&](int64_t hd, int64_t group, int64_t window, GgmlType kt, GgmlType vt, int64_t n_q, int32_t last) {
    fs.push_back(std::make_unique<Fixture>(make_case(hd, group, window, kt, vt, n_q, last, rng), rng));
  };
  add(128, 2, 0, GgmlType::F16, GgmlType::F16, 1, 5000 + int32_t(rng.next_u64() % 1000));          // 20 splits
  add(64, 4, 700, GgmlType::Q8_0, GgmlType::Q8_0, 8, 9000 + int32_t(rng.next_u64() % 1000));       // window: 4
  add(256, 1, 0, GgmlType::Q4_1, GgmlType::Q4_1, 64, 3000 + int32_t(rng.next_u64() % 1000));       // 12, 8 row tiles
  add(32, 8, 0, GgmlType::Q8_0, GgmlType::Q4_1, 2, 40000 + int32_t(rng.next_u64() % 1000));        // 32
  struct Call {
    Fixture* f;
    DevBuf dq, dpos, dout;
  };
  std::vector<Call> calls;
  std::vector<std::vector<float>> fresh;
  size_t ws_bytes = 0;
  for (const int i : {0, 1, 2, 3, 0, 2}) {  // the first and third again, after other shapes
    Fixture& f = *fs[size_t(i)];
    calls.push_back({&f, to_device(f.q), to_device(f.c.pos), DevBuf(f.q.size() * 4)});
    const int32_t max_pos = *std::max_element(f.c.pos.begin(), f.c.pos.end());
    ws_bytes = std::max(ws_bytes, kc::attention_workspace_bytes(int64_t(f.c.pos.size()), f.s,
                                                                std::max<int64_t>(f.c.capacity, max_pos + 1)));
    fresh.push_back(f.gpu(0, f.c.pos.size()));
    INFO(f.describe());
    check_decode_attention_close(fresh.back(), f.reference());
  }
  DevBuf ws(ws_bytes);
  ws.poison();
  const kc::Workspace w{ws.as<void>(), ws_bytes};
  REQUIRE(kc::attention_workspace_clear(w, nullptr));
  auto issue = [&](cudaStream_t st) {
    for (Call& c : calls)
      REQUIRE(kc::attention(c.dq.as<float>(), c.dpos.as<int32_t>(), int64_t(c.f->c.pos.size()), c.f->kv, c.f->s,
                            c.dout.as<float>(), w, st));
  };
  auto check = [&](const char* what) {
    for (size_t i = 0; i < calls.size(); ++i) {
      INFO(what << ": call " << i << ": " << calls[i].f->describe());
      const std::vector<float> got = calls[i].dout.download<float>(fresh[i].size());
      REQUIRE(std::memcmp(got.data(), fresh[i].data(), got.size() * 4) == 0);
    }
  };
  for (int rep = 0; rep < 2; ++rep) {
    for (Call& c : calls) c.dout.poison();
    issue(nullptr);
    check("eager");
  }
  cudaStream_t st = nullptr;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  REQUIRE(kc::capture_begin(st));
  issue(st);
  auto graph = kc::capture_end(st);
  REQUIRE(graph);
  for (int rep = 0; rep < 3; ++rep) {
    for (Call& c : calls) CUDA_REQUIRE(cudaMemsetAsync(c.dout.as<void>(), 0xff, c.dout.bytes(), st));
    REQUIRE(kc::graph_launch(*graph, st));
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    check("graph replay");
  }
  kc::graph_destroy(*graph);
  CUDA_REQUIRE(cudaStreamDestroy(st));
  std::vector<uint32_t> counters(kc::kAttentionCounterBytes / 4, 1);
  REQUIRE(kc::attention_counters(w) != nullptr);
  CUDA_REQUIRE(cudaMemcpy(counters.data(), kc::attention_counters(w), kc::kAttentionCounterBytes, cudaMemcpyDeviceToHost));
  CHECK(std::all_of(counters.begin(), counters.end(), [](uint32_t v) { return v == 0; }));
}

// The merging blocks' rounding of the output for the next matrix (act_round.h attention_round):
// the output unchanged, and exactly the codes the GEMV's own quantiser makes of it.
TEST_CASE("decode attention rounding its output: same output, the quantiser's codes bit for bit", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  DevBuf any(4096);
  for (const int64_t hd : {64, 128, 256}) {
    for (const GgmlType kt : {GgmlType::F16, GgmlType::Q8_0}) {
      for (const int64_t n_q : {1, 3}) {
        Fixture f(make_case(hd, 2, 0, kt, kt, n_q, 3000 + int32_t(rng.next_u64() % 2000), rng), rng);
        INFO(f.describe());
        const int64_t n = n_q * f.row;
        kernels::WeightView w;
        w.data = any.as<uint8_t>();
        w.n_in = f.row, w.n_out = 64;
        w.type = f.row % 256 == 0 ? GgmlType::Q4_K : GgmlType::Q8_0;
        w.layout = kernels::WeightLayout::kGpu;
        w.row_bytes = ggml_row_bytes(w.type, uint64_t(f.row));
        const size_t rb = kc::workspace_bytes_for_gemv(w, int(n_q));
        DevBuf wa(rb), wb(rb);
        wa.poison(), wb.poison();
        const auto ra = kc::act_rounding(w, int(n_q), {wa.as<void>(), rb});
        const auto rb_ = kc::act_rounding(w, int(n_q), {wb.as<void>(), rb});
        REQUIRE(ra.q != nullptr);
        DevBuf dq = to_device(f.q), dpos = to_device(f.c.pos), out(size_t(n) * 4);
        const size_t ws_bytes = kc::attention_workspace_bytes(n_q, f.s, f.c.capacity);
        DevBuf ws(ws_bytes);
        ws.poison();
        REQUIRE(kc::attention_workspace_clear({ws.as<void>(), ws_bytes}, nullptr));
        bool made = false;
        REQUIRE(kc::attention_round(dq.as<float>(), dpos.as<int32_t>(), n_q, f.kv, f.s, out.as<float>(),
                                    {ws.as<void>(), ws_bytes}, ra, &made, nullptr));
        CHECK(made);  // 3000+ keys: the call runs split
        const auto got = out.download<float>(size_t(n)), plain = f.gpu(0, size_t(n_q));
        CHECK(std::memcmp(got.data(), plain.data(), got.size() * 4) == 0);
        REQUIRE(kc::round_act(out.as<float>(), n, rb_, nullptr));
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        std::vector<int8_t> qa(static_cast<size_t>(n)), qb(static_cast<size_t>(n));
        std::vector<float> da(static_cast<size_t>(n / 32)), db(static_cast<size_t>(n / 32));
        std::vector<int> sa(static_cast<size_t>(n / 16)), sb(static_cast<size_t>(n / 16));
        REQUIRE(cudaMemcpy(qa.data(), ra.q, qa.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
        REQUIRE(cudaMemcpy(qb.data(), rb_.q, qb.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
        REQUIRE(cudaMemcpy(da.data(), ra.d, da.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
        REQUIRE(cudaMemcpy(db.data(), rb_.d, db.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
        REQUIRE(cudaMemcpy(sa.data(), ra.s16, sa.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
        REQUIRE(cudaMemcpy(sb.data(), rb_.s16, sb.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK(qa == qb);
        CHECK(std::memcmp(da.data(), db.data(), da.size() * 4) == 0);
        CHECK(sa == sb);
      }
    }
  }
}
