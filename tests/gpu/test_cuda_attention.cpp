// CUDA attention and kv_write against the CPU reference (kernels/cpu/attention.h): head dims
// 48/64/128/256, GQA ratios 1/2/4, full causal and a 16-key sliding window in a ring store whose
// positions wrap past the capacity, decode (1..16 queries at positions up to 40000, split over the
// sequence) and prefill (65..513 queries), f16 and f32 KV, and quantised KV (Q8_0, Q4_1, mixed K/V
// types): both sides read the same blocks (quantised by the host reference, kv/kv_quant.h), so the
// tolerance below holds for them too. The tensor-core prefill kernel (65+ queries, head_dim 64/128)
// is run for every (K, V) pair of f16 / q8_0 / q4_1 at 65, 200 and 512 queries. kv_write's
// quantisation must equal the host's bit for bit. Skips without a GPU.
//
// Tolerance (attention): both sides compute exact f32 products of the same K/V values (f16 KV
// decodes exactly), in different orders, with expf a few ulp apart; the output is a convex
// combination of V rows (|v| ~ 1), so its error is a few f32 ulp of the accumulated magnitudes
// plus the CPU's own sequential-sum error over up to 40000 keys (~sqrt(n) ulp):
//   |gpu - cpu| <= 2e-5 + 1e-3 * |cpu|.
// A wrong mask, slot or split merge moves outputs by ~1e-2 or more (q is scaled so that the
// softmax is peaked and single keys matter).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/rng.h"
#include "attention_test_util.h"
#include "cuda_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/cuda_api.h"
#include "kv/kv_quant.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::test;
namespace kc = strata::kernels::cuda;
namespace cpu = strata::kernels::cpu;

struct Case {
  int64_t head_dim, n_head_kv, group, window, capacity;
  GgmlType k_dtype, v_dtype;
  std::vector<int32_t> pos;
};

// The K/V type pairs with quantised members (f16 and f32 are covered by the full grids).
constexpr std::pair<GgmlType, GgmlType> kQuantPairs[] = {
    {GgmlType::Q8_0, GgmlType::Q8_0}, {GgmlType::Q4_1, GgmlType::Q4_1},
    {GgmlType::Q8_0, GgmlType::Q4_1}, {GgmlType::F16, GgmlType::Q4_1}};

void run_case(const Case& c, Rng& rng) {
  const int64_t n_q = int64_t(c.pos.size()), n_head = c.n_head_kv * c.group, hd = c.head_dim;
  const int64_t width = c.n_head_kv * hd;
  INFO("head_dim " << hd << " n_head_kv " << c.n_head_kv << " group " << c.group << " window " << c.window
                   << " capacity " << c.capacity << " K " << kv::kv_type_name(c.k_dtype) << " V "
                   << kv::kv_type_name(c.v_dtype) << " n_q " << n_q << " first pos " << c.pos.front() << " last pos "
                   << c.pos.back());
  const std::vector<uint8_t> k = random_kv_store(c.k_dtype, c.capacity, width, rng);
  const std::vector<uint8_t> v = random_kv_store(c.v_dtype, c.capacity, width, rng);
  // q * 3: peaked softmax, so that a single wrong key shows.
  auto q = random_normal(size_t(n_q * n_head * hd), rng, 3.0f);
  DevBuf dk = to_device(k), dv = to_device(v), dq = to_device(q), dpos = to_device(c.pos);
  DevBuf dout(q.size() * 4);
  dout.poison();
  kc::AttentionShapeDev s;
  s.n_head = n_head;
  s.n_head_kv = c.n_head_kv;
  s.head_dim = hd;
  s.window = c.window;
  s.scale = 1.0f / std::sqrt(float(hd));
  kc::KvStoreDev kv;
  kv.d_k = dk.as<void>();
  kv.d_v = dv.as<void>();
  kv.k_dtype = c.k_dtype;
  kv.v_dtype = c.v_dtype;
  kv.capacity = c.capacity;
  const int32_t max_pos = *std::max_element(c.pos.begin(), c.pos.end());
  const size_t ws_bytes = kc::attention_workspace_bytes(n_q, s, int64_t(max_pos) + 1);
  DevBuf ws(ws_bytes);
  ws.poison();  // partials unwritten by the kernel fail; the counters must start at zero
  const kc::Workspace w{ws_bytes ? ws.as<void>() : nullptr, ws_bytes};
  REQUIRE(kc::attention_workspace_clear(w, nullptr));
  REQUIRE(kc::attention(dq.as<float>(), dpos.as<int32_t>(), n_q, kv, s, dout.as<float>(), w, nullptr));
  auto got = dout.download<float>(q.size());

  std::vector<float> ref(q.size());
  cpu::KvStore ckv{k.data(), v.data(), c.k_dtype, c.v_dtype, c.capacity};
  cpu::AttentionShape cs{n_head, c.n_head_kv, hd, c.window, s.scale};
  cpu::attention(q.data(), c.pos.data(), n_q, ckv, cs, ref.data());
  // The f32 kernel: float rounding only. The tensor-core kernel (chunks of >= kTcMinQueries) rounds
  // Q, P and K/V to f16 (f16 KV exactly; f32, q8_0 and q4_1 values with one rounding, 2^-11
  // relative, like Q's): with |V| ~ 1 and q ~ 3 N(0, 1) the score error is ~1e-3, so outputs may
  // move by a few 1e-3; a wrong key moves them by O(1) (peaked softmax).
  const bool tc = kc::attention_tc_applies(n_q, hd, c.k_dtype, c.v_dtype);
  const double abs_tol = tc ? 8e-3 : 2e-5, rel_tol = tc ? 2e-3 : 1e-3;
  INFO((tc ? "tensor-core kernel" : "f32 kernel"));
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = std::isfinite(got[i]) ? std::abs(double(got[i]) - ref[i]) / (abs_tol + rel_tol * std::abs(ref[i]))
                                           : INFINITY;
    if (r > worst) worst = r, worst_i = i;
  }
  INFO("worst at " << worst_i << ": gpu " << got[worst_i] << " cpu " << ref[worst_i] << " (ws " << ws_bytes << " B)");
  CHECK(worst <= 1.0);
}

std::vector<int32_t> consecutive(int32_t first, int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = first + int32_t(i);
  return p;
}

// Decode: 1..16 queries; long contexts (splits) most of the time, a short one (fewer keys than a
// tile) sometimes; sliding windows in a ring of window + n_q - 1 + margin slots (positions wrap).
Case decode_case(Case c, Rng& rng) {
  const int64_t n_q = 1 + int64_t(rng.next_u64() % 16);
  const int32_t last = rng.uniform() < 0.2f ? int32_t(n_q - 1 + rng.next_u64() % 40)
                                            : int32_t(1000 + rng.next_u64() % 39000);
  c.pos = consecutive(last - int32_t(n_q) + 1, n_q);
  c.capacity = c.window > 0 ? c.window + n_q - 1 + int64_t(rng.next_u64() % 8) : int64_t(last) + 1 + 3;
  return c;
}

// Prefill: 300 queries.
Case prefill_case(Case c, Rng& rng) {
  const int64_t n_q = 300;
  const int32_t first = c.window > 0 ? int32_t(1000 + rng.next_u64() % 3000) : int32_t(rng.next_u64() % 1500);
  c.pos = consecutive(first, n_q);
  c.capacity = c.window > 0 ? c.window + n_q - 1 + 5 : int64_t(first) + n_q + 2;
  return c;
}

}  // namespace

TEST_CASE("cuda attention decode matches the CPU", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t hd : {48, 64, 128, 256}) {
    for (const int64_t group : {1, 2, 4}) {
      for (const int64_t window : {0, 16}) {
        for (const GgmlType dt : {GgmlType::F16, GgmlType::F32}) {
          Case c;
          c.head_dim = hd;
          c.n_head_kv = 2;
          c.group = group;
          c.window = window;
          c.k_dtype = c.v_dtype = dt;
          run_case(decode_case(c, rng), rng);
        }
      }
    }
  }
}

TEST_CASE("cuda attention decode over quantised KV matches the CPU over the same blocks", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t hd : {64, 128, 256}) {
    for (const int64_t window : {0, 16}) {
      for (const auto& [kt, vt] : kQuantPairs) {
        Case c;
        c.head_dim = hd;
        c.n_head_kv = 2;
        c.group = int64_t(1) << (rng.next_u64() % 3);  // 1, 2, 4
        c.window = window;
        c.k_dtype = kt;
        c.v_dtype = vt;
        run_case(decode_case(c, rng), rng);
      }
    }
  }
}

TEST_CASE("cuda attention prefill matches the CPU", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t hd : {48, 64, 128, 256}) {
    for (const int64_t group : {1, 2, 4}) {
      for (const int64_t window : {0, 16}) {
        for (const GgmlType dt : {GgmlType::F16, GgmlType::F32}) {
          if ((hd + group + window) % 2 == int64_t(dt == GgmlType::F16)) continue;  // half the grid, both dtypes covered
          Case c;
          c.head_dim = hd;
          c.n_head_kv = 2;
          c.group = group;
          c.window = window;
          c.k_dtype = c.v_dtype = dt;
          run_case(prefill_case(c, rng), rng);
        }
      }
    }
  }
}

TEST_CASE("cuda attention prefill over quantised KV matches the CPU over the same blocks", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t hd : {64, 128, 256}) {
    for (const int64_t window : {0, 16}) {
      for (const auto& [kt, vt] : kQuantPairs) {
        Case c;
        c.head_dim = hd;
        c.n_head_kv = 2;
        c.group = int64_t(1) << (rng.next_u64() % 3);
        c.window = window;
        c.k_dtype = kt;
        c.v_dtype = vt;
        run_case(prefill_case(c, rng), rng);
      }
    }
  }
}

TEST_CASE("cuda attention: long prefill chunks on the tensor-core kernel match the CPU", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t hd : {64, 128}) {
    for (const int64_t window : {0, 100}) {
      Case c;
      c.head_dim = hd;
      c.n_head_kv = 2;
      c.group = 2;
      c.window = window;
      c.k_dtype = c.v_dtype = window ? GgmlType::F16 : GgmlType::F32;
      // 513 queries (not a multiple of the 64-row tile) starting mid-context, over a ring that wraps.
      const int64_t n_q = 513;
      const int32_t first = int32_t(700 + rng.next_u64() % 300);
      c.pos = consecutive(first, n_q);
      c.capacity = window > 0 ? window + n_q - 1 + 3 : int64_t(first) + n_q;
      REQUIRE(kc::attention_tc_applies(n_q, hd, c.k_dtype, c.v_dtype));
      run_case(c, rng);
    }
  }
}

TEST_CASE("cuda attention: prefill chunks over quantised and mixed KV on the tensor-core kernel match the CPU",
          "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  constexpr GgmlType kTypes[] = {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1};
  int idx = 0;
  for (const GgmlType kt : kTypes) {
    for (const GgmlType vt : kTypes) {
      for (const int64_t hd : {64, 128}) {
        for (const int64_t n_q : {65, 200, 512}) {
          // Every other case (so every pair and head_dim gets both): a 100-key window
          // in a ring of window + n_q - 1 + 3 slots, far shorter than the positions (they wrap);
          // the others full causal over a store of exactly first + n_q slots. GQA 1, 2, 4 in turn
          // (each pair sees all six group x window combinations).
          Case c;
          c.head_dim = hd;
          c.n_head_kv = 2;
          c.group = int64_t(1) << (idx % 3);
          c.window = idx % 2 ? 100 : 0;
          c.k_dtype = kt;
          c.v_dtype = vt;
          const int32_t first = int32_t(700 + rng.next_u64() % 300);
          c.pos = consecutive(first, n_q);
          c.capacity = c.window > 0 ? c.window + n_q - 1 + 3 : int64_t(first) + n_q;
          REQUIRE(kc::attention_tc_applies(n_q, hd, kt, vt));
          run_case(c, rng);
          ++idx;
        }
      }
    }
  }
}

TEST_CASE("cuda kv_write converts rows into their ring slots", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const GgmlType dt : {GgmlType::F16, GgmlType::F32}) {
    const int64_t n_tok = 5, width = 2 * 128, capacity = 7;
    const size_t esz = dt == GgmlType::F16 ? 2 : 4;
    auto kf = random_normal(size_t(n_tok * width), rng, 100.0f), vf = random_normal(size_t(n_tok * width), rng, 1e-5f);
    kf[0] = 70000.0f;  // overflows f16 -> inf
    kf[1] = 1e-7f;     // f16 subnormal
    const auto pos = consecutive(int32_t(1000 + rng.next_u64() % 1000), n_tok);
    DevBuf dk = to_device(kf), dv = to_device(vf), dpos = to_device(pos);
    DevBuf sk(size_t(capacity * width) * esz), sv(size_t(capacity * width) * esz);
    sk.poison();
    sv.poison();
    kc::KvStoreDev kv{sk.as<void>(), sv.as<void>(), dt, dt, capacity};
    REQUIRE(kc::kv_write(dk.as<float>(), dv.as<float>(), dpos.as<int32_t>(), n_tok, width, kv, nullptr));
    auto gk = sk.download<uint8_t>(sk.bytes()), gv = sv.download<uint8_t>(sv.bytes());
    // Tolerance: none; f16 rounding is to nearest even on both sides.
    for (int64_t t = 0; t < n_tok; ++t) {
      const int64_t slot = pos[size_t(t)] % capacity;
      for (int64_t c = 0; c < width; ++c) {
        const size_t src = size_t(t * width + c), dst = size_t(slot * width + c);
        for (auto [got, f] : {std::pair{&gk, &kf}, std::pair{&gv, &vf}}) {
          if (esz == 2) {
            uint16_t h;
            std::memcpy(&h, got->data() + dst * 2, 2);
            REQUIRE(h == f32_to_f16((*f)[src]));
          } else {
            float x;
            std::memcpy(&x, got->data() + dst * 4, 4);
            REQUIRE(std::memcmp(&x, &(*f)[src], 4) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("cuda kv_write quantises rows into their slots exactly as the host", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const auto& [kt, vt] : kQuantPairs) {
    INFO("K " << kv::kv_type_name(kt) << " V " << kv::kv_type_name(vt));
    // A chunk is never longer than the ring (one slot, one writer), but it may wrap around its end.
    const int64_t n_tok = 19, width = 4 * 64, capacity = 23;
    auto kf = random_normal(size_t(n_tok * width), rng, 3.0f), vf = random_normal(size_t(n_tok * width), rng, 1e-3f);
    for (int64_t c = 0; c < width; ++c) kf[size_t(c)] += 0.25f * float(c % 5);  // offsets (Q4_1's m)
    std::fill(kf.begin() + 32, kf.begin() + 64, 1.5f);                        // a constant group
    std::fill(vf.begin() + 64, vf.begin() + 96, 0.0f);                        // an all-zero group
    vf[70] = -0.0f;                                                           // signed zeros: min -0 or +0
    kf[200] = 1e-6f;                                                          // subnormal scales nearby
    // Consecutive positions from a random start.
    const auto pos = consecutive(int32_t(rng.next_u64() % 1000), n_tok);
    DevBuf dk = to_device(kf), dv = to_device(vf), dpos = to_device(pos);
    const size_t krow = kv::kv_row_bytes(kt, uint32_t(width)), vrow = kv::kv_row_bytes(vt, uint32_t(width));
    DevBuf sk(size_t(capacity) * krow), sv(size_t(capacity) * vrow);
    sk.poison();
    sv.poison();
    kc::KvStoreDev kv{sk.as<void>(), sv.as<void>(), kt, vt, capacity};
    REQUIRE(kc::kv_write(dk.as<float>(), dv.as<float>(), dpos.as<int32_t>(), n_tok, width, kv, nullptr));
    auto gk = sk.download<uint8_t>(sk.bytes()), gv = sv.download<uint8_t>(sv.bytes());
    std::vector<uint8_t> want(std::max(krow, vrow));
    for (int64_t t = 0; t < n_tok; ++t) {
      const size_t slot = size_t(pos[size_t(t)] % capacity);
      INFO("token " << t << " slot " << slot);
      kv::kv_quantize_row(kt, kf.data() + t * width, want.data(), uint32_t(width));
      REQUIRE(std::memcmp(gk.data() + slot * krow, want.data(), krow) == 0);
      kv::kv_quantize_row(vt, vf.data() + t * width, want.data(), uint32_t(width));
      REQUIRE(std::memcmp(gv.data() + slot * vrow, want.data(), vrow) == 0);
    }
  }
}

TEST_CASE("cuda attention rejects bad shapes with a Status", "[gpu]") {
  if (!have_gpu()) return;
  DevBuf d(1 << 16);
  kc::KvStoreDev kv{d.as<void>(), d.as<void>(), GgmlType::F16, GgmlType::F16, 16};
  kc::AttentionShapeDev s;
  s.n_head = 6;
  s.n_head_kv = 4;
  s.head_dim = 64;
  kc::Workspace ws{};
  CHECK_FALSE(kc::attention(d.as<float>(), d.as<int32_t>(), 1, kv, s, d.as<float>(), ws, nullptr));  // 6 % 4
  s.n_head = 8;
  s.head_dim = 72;
  CHECK_FALSE(kc::attention(d.as<float>(), d.as<int32_t>(), 1, kv, s, d.as<float>(), ws, nullptr));  // head_dim
  s.head_dim = 64;
  kv.capacity = 0;
  CHECK_FALSE(kc::attention(d.as<float>(), d.as<int32_t>(), 1, kv, s, d.as<float>(), ws, nullptr));
  kv.capacity = 16;
  kv.k_dtype = kv.v_dtype = GgmlType::Q4_0;  // not a KV type
  const Status st = kc::kv_write(d.as<float>(), d.as<float>(), d.as<int32_t>(), 1, 64, kv, nullptr);
  REQUIRE_FALSE(st);
  CHECK(st.message().find("kv_write") != std::string::npos);
  kv.k_dtype = GgmlType::F32;  // f32 with f16: not a CUDA combination
  CHECK_FALSE(kc::attention(d.as<float>(), d.as<int32_t>(), 1, kv, s, d.as<float>(), ws, nullptr));
  kv.k_dtype = kv.v_dtype = GgmlType::Q8_0;
  s.head_dim = 48;  // quantised KV needs whole groups of 32 per head
  CHECK_FALSE(kc::attention(d.as<float>(), d.as<int32_t>(), 1, kv, s, d.as<float>(), ws, nullptr));
  s.head_dim = 64;
  kv.k_dtype = kv.v_dtype = GgmlType::F16;
  CHECK_FALSE(kc::attention(nullptr, d.as<int32_t>(), 1, kv, s, d.as<float>(), ws, nullptr));
}

TEST_CASE("cuda decode attention bandwidth at 32K keys (informational)", "[gpu]") {
  if (!have_gpu()) return;
  // 32768 keys, 16 KV heads x 128, 32 query heads (GQA 2), one query: 256 MiB of K + V in f16.
  const int64_t keys = 32768, n_head_kv = 16, hd = 128, n_head = 32;
  for (const GgmlType dt : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1}) {
  const size_t kv_bytes = size_t(keys) * kv::kv_row_bytes(dt, uint32_t(n_head_kv * hd));
  DevBuf dk(kv_bytes), dv(kv_bytes);
  CUDA_REQUIRE(cudaMemset(dk.as<void>(), 0x11, kv_bytes));  // small finite values (f16 bits 0x1111 / 0x2222)
  CUDA_REQUIRE(cudaMemset(dv.as<void>(), 0x22, kv_bytes));
  Rng rng(fresh_seed());
  auto q = random_normal(size_t(n_head * hd), rng);
  const std::vector<int32_t> pos = {int32_t(keys - 1)};
  DevBuf dq = to_device(q), dpos = to_device(pos), dout(q.size() * 4);
  kc::AttentionShapeDev s;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.head_dim = hd;
  s.scale = 1.0f / std::sqrt(float(hd));
  kc::KvStoreDev kv{dk.as<void>(), dv.as<void>(), dt, dt, keys};
  const size_t ws_bytes = kc::attention_workspace_bytes(1, s, keys);
  DevBuf ws(ws_bytes);
  const kc::Workspace w{ws_bytes ? ws.as<void>() : nullptr, ws_bytes};
  REQUIRE(kc::attention_workspace_clear(w, nullptr));
  for (int i = 0; i < 3; ++i) REQUIRE(kc::attention(dq.as<float>(), dpos.as<int32_t>(), 1, kv, s, dout.as<float>(), w, nullptr));
  cudaEvent_t a, b;
  CUDA_REQUIRE(cudaEventCreate(&a));
  CUDA_REQUIRE(cudaEventCreate(&b));
  const int iters = 50;
  CUDA_REQUIRE(cudaEventRecord(a));
  for (int i = 0; i < iters; ++i) REQUIRE(kc::attention(dq.as<float>(), dpos.as<int32_t>(), 1, kv, s, dout.as<float>(), w, nullptr));
  CUDA_REQUIRE(cudaEventRecord(b));
  CUDA_REQUIRE(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_REQUIRE(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  const double sec = ms / 1e3 / iters;
  WARN("decode attention, 32K keys x 16 KV heads x 128, " << kv::kv_type_name(dt) << ", GQA 2: " << sec * 1e6
       << " us, " << double(2 * kv_bytes) / sec / 1e9 << " GB/s over the KV bytes (workspace " << ws_bytes << " B)");
  }
}
