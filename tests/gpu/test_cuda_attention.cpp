// CUDA attention and kv_write against the CPU reference (kernels/cpu/attention.h): head dims
// 48/64/128/256, GQA ratios 1/2/4, full causal and a 16-key sliding window in a ring store whose
// positions wrap past the capacity, decode (1..16 queries at positions up to 40000, split over the
// sequence) and prefill (300 queries), f16 and f32 KV. Skips without a GPU.
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
#include "cuda_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/cuda_api.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::test;
namespace kc = strata::kernels::cuda;
namespace cpu = strata::kernels::cpu;

struct Case {
  int64_t head_dim, n_head_kv, group, window, capacity;
  GgmlType dtype;
  std::vector<int32_t> pos;
};

void run_case(const Case& c, Rng& rng) {
  const int64_t n_q = int64_t(c.pos.size()), n_head = c.n_head_kv * c.group, hd = c.head_dim;
  const int64_t width = c.n_head_kv * hd;
  const size_t n_kv = size_t(c.capacity * width);
  const size_t esz = c.dtype == GgmlType::F16 ? 2 : 4;
  INFO("head_dim " << hd << " n_head_kv " << c.n_head_kv << " group " << c.group << " window " << c.window
                   << " capacity " << c.capacity << " " << (esz == 2 ? "f16" : "f32") << " n_q " << n_q
                   << " first pos " << c.pos.front() << " last pos " << c.pos.back());
  std::vector<uint8_t> k(n_kv * esz), v(n_kv * esz);
  for (auto* buf : {&k, &v}) {
    auto f = random_normal(n_kv, rng);
    if (esz == 2) {
      auto* h = reinterpret_cast<uint16_t*>(buf->data());
      for (size_t i = 0; i < n_kv; ++i) h[i] = f32_to_f16(f[i]);
    } else {
      std::memcpy(buf->data(), f.data(), n_kv * 4);
    }
  }
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
  kv.dtype = c.dtype;
  kv.capacity = c.capacity;
  const int32_t max_pos = *std::max_element(c.pos.begin(), c.pos.end());
  const size_t ws_bytes = kc::attention_workspace_bytes(n_q, s, int64_t(max_pos) + 1);
  DevBuf ws(ws_bytes);
  ws.poison();
  REQUIRE(kc::attention(dq.as<float>(), dpos.as<int32_t>(), n_q, kv, s, dout.as<float>(),
                        kc::Workspace{ws_bytes ? ws.as<void>() : nullptr, ws_bytes}, nullptr));
  auto got = dout.download<float>(q.size());

  std::vector<float> ref(q.size());
  cpu::KvStore ckv{k.data(), v.data(), c.dtype, c.capacity};
  cpu::AttentionShape cs{n_head, c.n_head_kv, hd, c.window, s.scale};
  cpu::attention(q.data(), c.pos.data(), n_q, ckv, cs, ref.data());
  // The f32 kernel: float rounding only. The tensor-core kernel (chunks of >= kTcMinQueries) rounds
  // Q, P (and f32 K/V) to f16: with |V| ~ 1 and q ~ 3 N(0, 1) the score error is ~1e-3, so outputs
  // may move by a few 1e-3; a wrong key moves them by O(1) (peaked softmax).
  const bool tc = kc::attention_tc_applies(n_q, hd);
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
          c.dtype = dt;
          const int64_t n_q = 1 + int64_t(rng.next_u64() % 16);
          // Long contexts (splits) most of the time, a short one (fewer keys than a tile) sometimes.
          const int32_t last = rng.uniform() < 0.2f ? int32_t(n_q - 1 + rng.next_u64() % 40)
                                                    : int32_t(1000 + rng.next_u64() % 39000);
          c.pos = consecutive(last - int32_t(n_q) + 1, n_q);
          // Sliding window: a ring of window + n_q - 1 + margin slots, so positions wrap many times.
          c.capacity = window > 0 ? window + n_q - 1 + int64_t(rng.next_u64() % 8) : int64_t(last) + 1 + 3;
          run_case(c, rng);
        }
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
          c.dtype = dt;
          const int64_t n_q = 300;
          const int32_t first = window > 0 ? int32_t(1000 + rng.next_u64() % 3000) : int32_t(rng.next_u64() % 1500);
          c.pos = consecutive(first, n_q);
          c.capacity = window > 0 ? window + n_q - 1 + 5 : int64_t(first) + n_q + 2;
          run_case(c, rng);
        }
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
      c.dtype = window ? GgmlType::F16 : GgmlType::F32;
      // 513 queries (not a multiple of the 64-row tile) starting mid-context, over a ring that wraps.
      const int64_t n_q = 513;
      const int32_t first = int32_t(700 + rng.next_u64() % 300);
      c.pos = consecutive(first, n_q);
      c.capacity = window > 0 ? window + n_q - 1 + 3 : int64_t(first) + n_q;
      REQUIRE(kc::attention_tc_applies(n_q, hd));
      run_case(c, rng);
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
    kc::KvStoreDev kv{sk.as<void>(), sv.as<void>(), dt, capacity};
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

TEST_CASE("cuda attention rejects bad shapes with a Status", "[gpu]") {
  if (!have_gpu()) return;
  DevBuf d(1 << 16);
  kc::KvStoreDev kv{d.as<void>(), d.as<void>(), GgmlType::F16, 16};
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
  kv.dtype = GgmlType::Q8_0;
  const Status st = kc::kv_write(d.as<float>(), d.as<float>(), d.as<int32_t>(), 1, 64, kv, nullptr);
  REQUIRE_FALSE(st);
  CHECK(st.message().find("kv_write") != std::string::npos);
  kv.dtype = GgmlType::F16;
  CHECK_FALSE(kc::attention(nullptr, d.as<int32_t>(), 1, kv, s, d.as<float>(), ws, nullptr));
}

TEST_CASE("cuda decode attention bandwidth at 32K keys (informational)", "[gpu]") {
  if (!have_gpu()) return;
  // 32768 keys, 16 KV heads x 128, f16, 32 query heads (GQA 2), one query: 256 MiB of K + V.
  const int64_t keys = 32768, n_head_kv = 16, hd = 128, n_head = 32;
  const size_t n_kv = size_t(keys * n_head_kv * hd);
  DevBuf dk(n_kv * 2), dv(n_kv * 2);
  CUDA_REQUIRE(cudaMemset(dk.as<void>(), 0x11, n_kv * 2));  // small finite f16 values
  CUDA_REQUIRE(cudaMemset(dv.as<void>(), 0x22, n_kv * 2));
  Rng rng(fresh_seed());
  auto q = random_normal(size_t(n_head * hd), rng);
  const std::vector<int32_t> pos = {int32_t(keys - 1)};
  DevBuf dq = to_device(q), dpos = to_device(pos), dout(q.size() * 4);
  kc::AttentionShapeDev s;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.head_dim = hd;
  s.scale = 1.0f / std::sqrt(float(hd));
  kc::KvStoreDev kv{dk.as<void>(), dv.as<void>(), GgmlType::F16, keys};
  const size_t ws_bytes = kc::attention_workspace_bytes(1, s, keys);
  DevBuf ws(ws_bytes);
  const kc::Workspace w{ws_bytes ? ws.as<void>() : nullptr, ws_bytes};
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
  WARN("decode attention, 32K keys x 16 KV heads x 128, f16, GQA 2: " << sec * 1e6 << " us, "
       << double(2 * n_kv * 2) / sec / 1e9 << " GB/s over the KV bytes (workspace " << ws_bytes << " B)");
}
