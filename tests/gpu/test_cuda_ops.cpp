// CUDA element-wise / per-vector ops against the CPU reference (kernels/cpu/ops.h), fresh random
// inputs each run, outputs poisoned with NaN before each launch. Skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "cuda_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/rope_kv.h"
#include "kv/kv_quant.h"
#include "runtime/sampler.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::test;
namespace kc = strata::kernels::cuda;
namespace cpu = strata::kernels::cpu;

// Largest |a - b| / (abs_tol + rel_tol * |b|); <= 1 passes. NaN anywhere fails.
double worst_ratio(const std::vector<float>& a, const std::vector<float>& b, double abs_tol, double rel_tol) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / (abs_tol + rel_tol * std::abs(double(b[i]))));
  }
  return worst;
}

}  // namespace

TEST_CASE("cuda rms_norm matches the CPU", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t n : {64, 1000, 5376}) {
    for (const bool weighted : {true, false}) {
      const int64_t n_vec = 7;
      auto x = random_normal(size_t(n_vec * n), rng, 3.0f);
      auto w = random_normal(size_t(n), rng);
      DevBuf dx = to_device(x), dw = to_device(w), dout(x.size() * 4);
      dout.poison();
      REQUIRE(kc::rms_norm(dx.as<float>(), weighted ? dw.as<float>() : nullptr, n_vec, n, 1e-6f, dout.as<float>(), nullptr));
      auto got = dout.download<float>(x.size());
      cpu::rms_norm_vecs(x.data(), weighted ? w.data() : nullptr, n_vec, n, 1e-6f, x.data());
      // Tolerance: both sum x^2 in double, only the order differs, so inv agrees to ~1 f32 ulp and
      // the products are the same roundings: ~3 ulp (4e-7 relative) plus a tiny absolute floor.
      INFO("n " << n << " weighted " << weighted);
      CHECK(worst_ratio(got, x, 1e-30, 4e-7) <= 1.0);
    }
  }
  // In place (out aliases x).
  auto x = random_normal(3 * 256, rng);
  DevBuf dx = to_device(x);
  REQUIRE(kc::rms_norm(dx.as<float>(), nullptr, 3, 256, 1e-5f, dx.as<float>(), nullptr));
  auto got = dx.download<float>(x.size());
  cpu::rms_norm_vecs(x.data(), nullptr, 3, 256, 1e-5f, x.data());
  CHECK(worst_ratio(got, x, 1e-30, 4e-7) <= 1.0);
}

TEST_CASE("cuda rms_norm_add equals rms_norm then add, bit for bit, and matches the CPU", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t n : {64, 1001, 5376}) {  // 1001: the scalar (non-float4) path
    const int64_t n_vec = 5;
    auto h = random_normal(size_t(n_vec * n), rng, 3.0f);
    auto x = random_normal(size_t(n_vec * n), rng);
    auto w = random_normal(size_t(n), rng);
    DevBuf dh = to_device(h), dw = to_device(w), dx = to_device(x), dnorm(h.size() * 4), dx2 = to_device(x);
    REQUIRE(kc::rms_norm_add(dh.as<float>(), dw.as<float>(), n_vec, n, 1e-6f, dx.as<float>(), nullptr));
    REQUIRE(kc::rms_norm(dh.as<float>(), dw.as<float>(), n_vec, n, 1e-6f, dnorm.as<float>(), nullptr));
    REQUIRE(kc::add(dx2.as<float>(), dnorm.as<float>(), n_vec * n, nullptr));
    auto got = dx.download<float>(x.size()), unfused = dx2.download<float>(x.size());
    INFO("n " << n);
    CHECK(std::memcmp(got.data(), unfused.data(), got.size() * 4) == 0);
    cpu::rms_norm_vecs(h.data(), w.data(), n_vec, n, 1e-6f, h.data());
    cpu::add(x.data(), h.data(), n_vec * n);
    // rms_norm's bound on the normed term (~3 ulp of |h|, up to ~4 |x|-sized values here) plus the
    // add's rounding: an absolute 2e-6 floor covers cancellation between x and the normed h.
    CHECK(worst_ratio(got, x, 2e-6, 4e-7) <= 1.0);
  }
  CHECK_FALSE(kc::rms_norm_add(nullptr, nullptr, 1, 8, 1e-6f, nullptr, nullptr));
  DevBuf d(64 * 4);
  CHECK_FALSE(kc::rms_norm_add(d.as<float>(), nullptr, 1, 64, 1e-6f, d.as<float>(), nullptr));  // aliasing
}

TEST_CASE("cuda qk_norm_rope matches the CPU's QK-norm then rope on every head", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t hd : {64, 128, 256}) {
    for (const bool neox : {true, false}) {
      for (const bool with_norm : {true, false}) {
        const int64_t n_tok = 5, n_head = 12, n_head_kv = 3;  // 15 heads: a partial group of 8
        std::vector<int32_t> pos = {0, 1, 131071, int32_t(rng.next_u64() % 131072), 4097};
        auto q = random_normal(size_t(n_tok * n_head * hd), rng, 2.0f);
        auto k = random_normal(size_t(n_tok * n_head_kv * hd), rng, 2.0f);
        auto qw = random_normal(size_t(hd), rng), kw = random_normal(size_t(hd), rng);
        std::vector<float> div(size_t(hd / 2));
        for (auto& d : div) d = 1.0f + 3.0f * rng.uniform();
        DevBuf dq = to_device(q), dk = to_device(k), dpos = to_device(pos), dqw = to_device(qw), dkw = to_device(kw),
               ddiv = to_device(div);
        kc::QkRopeDev p;
        p.n_head = n_head, p.n_head_kv = n_head_kv, p.head_dim = hd;
        if (with_norm) p.q_norm = dqw.as<float>(), p.k_norm = dkw.as<float>();
        p.eps = 1e-6f, p.base = 1e4f, p.linear_scale = 8.0f, p.freq_div = neox ? ddiv.as<float>() : nullptr;
        p.neox = neox;
        REQUIRE(kc::qk_norm_rope(dq.as<float>(), dk.as<float>(), dpos.as<int32_t>(), n_tok, p, nullptr));
        auto got_q = dq.download<float>(q.size()), got_k = dk.download<float>(k.size());
        if (with_norm) {
          cpu::rms_norm_vecs(q.data(), qw.data(), n_tok * n_head, hd, 1e-6f, q.data());
          cpu::rms_norm_vecs(k.data(), kw.data(), n_tok * n_head_kv, hd, 1e-6f, k.data());
        }
        for (int64_t t = 0; t < n_tok; ++t) {
          const float ps = float(pos[size_t(t)]) / 8.0f;
          cpu::rope_heads(q.data() + t * n_head * hd, n_head, hd, ps, 1e4f, neox ? div.data() : nullptr, neox);
          cpu::rope_heads(k.data() + t * n_head_kv * hd, n_head_kv, hd, ps, 1e4f, neox ? div.data() : nullptr, neox);
        }
        // The norm's bound (~3 ulp relative; only the double sum's order differs) carried through
        // the rotation (two products and a sum of values up to a few units), plus rope's own 1e-6.
        INFO("hd " << hd << " neox " << neox << " norm " << with_norm);
        CHECK(worst_ratio(got_q, q, 4e-6, 1e-6) <= 1.0);
        CHECK(worst_ratio(got_k, k, 4e-6, 1e-6) <= 1.0);
      }
    }
  }
  kc::QkRopeDev bad;
  bad.n_head = 1, bad.n_head_kv = 1, bad.head_dim = 1024, bad.base = 1e4f;
  DevBuf d(1024 * 4), dp(4);
  CHECK_FALSE(kc::qk_norm_rope(d.as<float>(), d.as<float>(), dp.as<int32_t>(), 1, bad, nullptr));  // head_dim > 512
}

TEST_CASE("cuda argmax_key gives the sampler's argmax: first of ties, NaN and -inf passed over, -0 ties +0", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  DevBuf key(8);
  auto device_argmax = [&](const std::vector<float>& x) {
    DevBuf dx = to_device(x);
    REQUIRE(kc::argmax_key(dx.as<float>(), int64_t(x.size()), key.as<unsigned long long>(), nullptr));
    return kc::argmax_from_key(key.download<unsigned long long>(1)[0]);
  };
  for (const size_t n : {size_t(1), size_t(7), size_t(1000), size_t(262144), size_t(300001)}) {
    for (int trial = 0; trial < 4; ++trial) {
      auto x = random_normal(n, rng, 3.0f);
      // Ties of the maximum at random places (the first must win, wherever the blocks split them),
      // NaNs and -inf scattered, signed zeros.
      const float top = 50.0f + float(trial);
      for (int k = 0; k < 3; ++k) x[rng.next_u64() % n] = top;
      for (int k = 0; k < 5; ++k) x[rng.next_u64() % n] = nan;
      for (int k = 0; k < 5; ++k) x[rng.next_u64() % n] = -inf;
      if (trial == 3) {  // all negative but zeros: -0 before +0 (the first wins), the rest below
        for (auto& v : x) v = -std::abs(v) - 1.0f;
        x[n / 3] = -0.0f;
        x[n - 1] = 0.0f;
      }
      INFO("n " << n << " trial " << trial);
      CHECK(device_argmax(x) == runtime::argmax(x));
    }
  }
  CHECK(device_argmax({-inf, -inf, nan}) == 0);  // nothing above -inf: 0, as the sampler
  CHECK(device_argmax({nan, -inf, 2.0f, inf, inf}) == 3);
  CHECK(device_argmax({nan, -1e30f}) == runtime::argmax(std::vector<float>{nan, -1e30f}));
  // A second call resets the key: a smaller maximum afterwards is still found.
  CHECK(device_argmax({1.0f, 9.0f}) == 1);
  CHECK(device_argmax({3.0f, 1.0f}) == 0);
  CHECK_FALSE(kc::argmax_key(nullptr, 4, key.as<unsigned long long>(), nullptr));
}

TEST_CASE("cuda qk_norm_rope with rope_angles' table gives the bits of its own angles", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t hd : {64, 128, 256, 512}) {
    for (const bool neox : {true, false}) {
      const int64_t n_tok = 6, n_head = 9, n_head_kv = 3, width = n_head_kv * hd;
      std::vector<int32_t> pos = {0, 1, 131071, int32_t(rng.next_u64() % 131072), 4097, 7};
      auto q = random_normal(size_t(n_tok * n_head * hd), rng, 2.0f);
      auto k = random_normal(size_t(n_tok * width), rng, 2.0f);
      auto v = random_normal(size_t(n_tok * width), rng, 2.0f);
      auto qw = random_normal(size_t(hd), rng), kw = random_normal(size_t(hd), rng);
      std::vector<float> div(size_t(hd / 2));
      for (auto& d : div) d = 1.0f + 3.0f * rng.uniform();
      DevBuf qa = to_device(q), qb = to_device(q), ka = to_device(k), kb = to_device(k), dv = to_device(v),
             dpos = to_device(pos), dqw = to_device(qw), dkw = to_device(kw), ddiv = to_device(div),
             table(size_t(n_tok * hd) * sizeof(float));
      CUDA_REQUIRE(cudaMemset(table.as<void>(), 0xff, table.bytes()));  // NaNs where nothing is written
      kc::QkRopeDev p;
      p.n_head = n_head, p.n_head_kv = n_head_kv, p.head_dim = hd;
      p.q_norm = dqw.as<float>(), p.k_norm = dkw.as<float>();
      p.eps = 1e-6f, p.base = neox ? 1e6f : 1e4f, p.linear_scale = neox ? 1.0f : 8.0f;
      p.freq_div = neox ? ddiv.as<float>() : nullptr, p.neox = neox;
      INFO("hd " << hd << " neox " << neox);
      REQUIRE(kc::rope_angles(dpos.as<int32_t>(), n_tok, p, table.as<float>(), nullptr));
      // The table holds cos, sin pairs: cos^2 + sin^2 = 1 and pair 0 (angle pos / lin) at the CPU's value.
      const auto t = table.download<float>(size_t(n_tok * hd));
      for (int64_t r = 0; r < n_tok; ++r) {
        const double c = t[size_t(r * hd)], s = t[size_t(r * hd + 1)];
        CHECK(std::abs(c * c + s * s - 1.0) < 1e-6);
        const double a = double(float(pos[size_t(r)]) / p.linear_scale) / (neox ? double(div[0]) : 1.0);
        CHECK(std::abs(c - std::cos(a)) < 1e-6);
        CHECK(std::abs(s - std::sin(a)) < 1e-6);
      }
      REQUIRE(kc::qk_norm_rope(qa.as<float>(), ka.as<float>(), dpos.as<int32_t>(), n_tok, p, nullptr));
      kc::QkRopeDev pt = p;
      pt.angles = table.as<float>();
      REQUIRE(kc::qk_norm_rope(qb.as<float>(), kb.as<float>(), dpos.as<int32_t>(), n_tok, pt, nullptr));
      CHECK(qa.download<uint8_t>(q.size() * 4) == qb.download<uint8_t>(q.size() * 4));
      CHECK(ka.download<uint8_t>(k.size() * 4) == kb.download<uint8_t>(k.size() * 4));
      // The fused KV write too: both forms store the same cache bytes. Positions of distinct slots
      // (two rows of one slot would race) and the ring's wrap: slots 5, 6, 7, 0, 1, 2.
      const int64_t capacity = 8;
      const std::vector<int32_t> kv_pos = {5, 6, 7, 8, 9, 130};
      DevBuf dkv_pos = to_device(kv_pos);
      REQUIRE(kc::rope_angles(dkv_pos.as<int32_t>(), n_tok, p, table.as<float>(), nullptr));
      const size_t cb = kv::kv_row_bytes(GgmlType::Q8_0, uint32_t(width)) * capacity;
      DevBuf q1 = to_device(q), q2 = to_device(q), k1 = to_device(k), k2 = to_device(k), c1k(cb), c1v(cb), c2k(cb), c2v(cb);
      for (DevBuf* c : {&c1k, &c1v, &c2k, &c2v}) CUDA_REQUIRE(cudaMemset(c->as<void>(), 0x5a, c->bytes()));
      const kc::KvStoreDev s1{c1k.as<void>(), c1v.as<void>(), GgmlType::Q8_0, GgmlType::Q8_0, capacity};
      const kc::KvStoreDev s2{c2k.as<void>(), c2v.as<void>(), GgmlType::Q8_0, GgmlType::Q8_0, capacity};
      REQUIRE(kc::qk_norm_rope_kv(q1.as<float>(), k1.as<float>(), dv.as<float>(), dkv_pos.as<int32_t>(), n_tok, p, s1, nullptr));
      REQUIRE(kc::qk_norm_rope_kv(q2.as<float>(), k2.as<float>(), dv.as<float>(), dkv_pos.as<int32_t>(), n_tok, pt, s2, nullptr));
      CHECK(q1.download<uint8_t>(q.size() * 4) == q2.download<uint8_t>(q.size() * 4));
      CHECK(c1k.download<uint8_t>(cb) == c2k.download<uint8_t>(cb));
      CHECK(c1v.download<uint8_t>(cb) == c2v.download<uint8_t>(cb));
    }
  }
  kc::QkRopeDev p;
  p.n_head = 1, p.n_head_kv = 1, p.head_dim = 64, p.base = 1e4f;
  DevBuf dp(4);
  CHECK_FALSE(kc::rope_angles(dp.as<int32_t>(), 1, p, nullptr, nullptr));  // no table
}

TEST_CASE("cuda qk_norm_rope_kv equals qk_norm_rope then kv_write, bit for bit, for every cache dtype", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const std::pair<GgmlType, GgmlType> dtypes[] = {{GgmlType::F16, GgmlType::F16}, {GgmlType::F32, GgmlType::F32},
                                                  {GgmlType::Q8_0, GgmlType::Q8_0}, {GgmlType::Q4_1, GgmlType::Q4_1},
                                                  {GgmlType::Q8_0, GgmlType::F16}};
  for (const int64_t hd : {64, 128, 256}) {
    for (const auto& [kt, vt] : dtypes) {
      const int64_t n_tok = 3, n_head = 8, n_head_kv = 3, capacity = 5, width = n_head_kv * hd;
      INFO("hd " << hd << " K " << kv::kv_type_name(kt) << " V " << kv::kv_type_name(vt));
      std::vector<int32_t> pos = {3, 4, 5};  // slots 3, 4, 0: the ring wraps
      auto q = random_normal(size_t(n_tok * n_head * hd), rng, 2.0f);
      auto k = random_normal(size_t(n_tok * width), rng, 2.0f);
      auto v = random_normal(size_t(n_tok * width), rng, 2.0f);
      auto qw = random_normal(size_t(hd), rng), kw = random_normal(size_t(hd), rng);
      const size_t kb = kv::kv_row_bytes(kt, uint32_t(width)) * capacity, vb = kv::kv_row_bytes(vt, uint32_t(width)) * capacity;
      DevBuf qa = to_device(q), qb = to_device(q), ka = to_device(k), kb_ = to_device(k), dv = to_device(v),
             dpos = to_device(pos), dqw = to_device(qw), dkw = to_device(kw), ca_k(kb), ca_v(vb), cb_k(kb), cb_v(vb);
      for (DevBuf* c : {&ca_k, &ca_v, &cb_k, &cb_v}) CUDA_REQUIRE(cudaMemset(c->as<void>(), 0x5a, c->bytes()));
      kc::QkRopeDev p;
      p.n_head = n_head, p.n_head_kv = n_head_kv, p.head_dim = hd;
      p.q_norm = dqw.as<float>(), p.k_norm = dkw.as<float>();
      p.eps = 1e-6f, p.base = 1e4f, p.linear_scale = 1.0f, p.neox = hd == 128;
      const kc::KvStoreDev sa{ca_k.as<void>(), ca_v.as<void>(), kt, vt, capacity};
      const kc::KvStoreDev sb{cb_k.as<void>(), cb_v.as<void>(), kt, vt, capacity};
      REQUIRE(kc::qk_norm_rope_kv_applies(sa, hd));
      REQUIRE(kc::qk_norm_rope_kv(qa.as<float>(), ka.as<float>(), dv.as<float>(), dpos.as<int32_t>(), n_tok, p, sa, nullptr));
      REQUIRE(kc::qk_norm_rope(qb.as<float>(), kb_.as<float>(), dpos.as<int32_t>(), n_tok, p, nullptr));
      REQUIRE(kc::kv_write(kb_.as<float>(), dv.as<float>(), dpos.as<int32_t>(), n_tok, width, sb, nullptr));
      CHECK(qa.download<uint8_t>(q.size() * 4) == qb.download<uint8_t>(q.size() * 4));
      CHECK(ka.download<uint8_t>(k.size() * 4) == kb_.download<uint8_t>(k.size() * 4));
      CHECK(ca_k.download<uint8_t>(kb) == cb_k.download<uint8_t>(kb));
      CHECK(ca_v.download<uint8_t>(vb) == cb_v.download<uint8_t>(vb));
    }
  }
  // Quantised caches need whole groups of 32 per head.
  DevBuf d(4096);
  const kc::KvStoreDev q8{d.as<void>(), d.as<void>(), GgmlType::Q8_0, GgmlType::Q8_0, 4};
  CHECK_FALSE(kc::qk_norm_rope_kv_applies(q8, 48));
}

TEST_CASE("cuda rope matches the CPU, neox and interleaved, up to position 131071", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t hd : {64, 128, 256}) {
    for (const bool neox : {true, false}) {
      for (const bool with_div : {false, true}) {
        for (const float lin : {1.0f, 8.0f}) {
          const int64_t n_tok = 6, n_heads = 3;
          std::vector<int32_t> pos = {0, 1, 131071, 131070, int32_t(rng.next_u64() % 131072), 65537};
          auto x = random_normal(size_t(n_tok * n_heads * hd), rng);
          std::vector<float> div(size_t(hd / 2));
          for (auto& d : div) d = 1.0f + 7.0f * rng.uniform();
          DevBuf dx = to_device(x), dpos = to_device(pos), ddiv = to_device(div);
          REQUIRE(kc::rope(dx.as<float>(), dpos.as<int32_t>(), n_tok, n_heads, hd, 1e6f, lin,
                           with_div ? ddiv.as<float>() : nullptr, neox, nullptr));
          auto got = dx.download<float>(x.size());
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t h = 0; h < n_heads; ++h) {
              cpu::rope(x.data() + (t * n_heads + h) * hd, hd, float(pos[size_t(t)]) / lin, 1e6f,
                        with_div ? div.data() : nullptr, neox);
            }
          }
          // Tolerance: both compute the angle in double (pow, product, sin/cos; ~1e-16 relative
          // apart) and round c, s to f32 the same way, so results agree to an f32 ulp or two:
          // 1e-6 absolute on N(0,1) inputs. An f32 angle at 131071 would be off by ~4e-3.
          INFO("hd " << hd << " neox " << neox << " div " << with_div << " lin " << lin);
          CHECK(worst_ratio(got, x, 1e-6, 0) <= 1.0);
        }
      }
    }
  }
}

TEST_CASE("cuda silu_mul, gelu_tanh_mul and add match the CPU", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const int64_t n = 100003;
  auto g = random_normal(size_t(n), rng, 4.0f), u = random_normal(size_t(n), rng);
  DevBuf du = to_device(u), dg(size_t(n) * 4);
  {
    dg.upload(g);
    REQUIRE(kc::silu_mul(dg.as<float>(), du.as<float>(), n, nullptr));
    auto got = dg.download<float>(size_t(n));
    auto ref = g;
    cpu::silu_mul(ref.data(), u.data(), n);
    // Tolerance: expf on the device and in libm are each within ~1-2 ulp; the rest is the same
    // rounding sequence: 8 ulp relative (1e-6) plus 1e-30.
    CHECK(worst_ratio(got, ref, 1e-30, 1e-6) <= 1.0);
  }
  {
    dg.upload(g);
    REQUIRE(kc::gelu_tanh_mul(dg.as<float>(), du.as<float>(), n, nullptr));
    auto got = dg.download<float>(size_t(n));
    auto ref = g;
    cpu::gelu_tanh_mul(ref.data(), u.data(), n);
    // Tolerance: tanhf differs by a few ulp and nvcc may contract the polynomial into FMAs; near
    // 1 + tanh(..) ~ 0 (g << 0) that cancellation amplifies relative error, hence 1e-6 absolute
    // on top of 4e-6 relative.
    CHECK(worst_ratio(got, ref, 1e-6, 4e-6) <= 1.0);
  }
  {
    dg.upload(g);
    REQUIRE(kc::add(dg.as<float>(), du.as<float>(), n, nullptr));
    auto got = dg.download<float>(size_t(n));
    auto ref = g;
    cpu::add(ref.data(), u.data(), n);
    CHECK(std::memcmp(got.data(), ref.data(), got.size() * 4) == 0);  // one IEEE add: exact
  }
}

TEST_CASE("cuda get_rows decodes every quant type bit-exactly", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  int n_types = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto info = ggml_type_info(id);
    if (!info) continue;
    const cpu::QuantKernels* qk = cpu::quant_kernels(info->type);
    // The CUDA backend's types (all with CPU kernels, the i-quants included).
    if (!qk || !kc::supports_weight_type(info->type)) continue;
    ++n_types;
    INFO("type " << info->name);
    const int64_t n_in = 768, n_out = 41, n_tok = 9;
    const uint64_t row_bytes = ggml_row_bytes(info->type, uint64_t(n_in));
    std::vector<uint8_t> table(size_t(row_bytes * n_out));
    qk->fill_random(table.data(), n_in * n_out, rng, 0.02f);
    std::vector<int32_t> ids(static_cast<size_t>(n_tok));
    for (auto& i : ids) i = int32_t(rng.next_u64() % uint64_t(n_out));
    ids[0] = 0;
    ids[1] = int32_t(n_out - 1);
    const float scale = 1.0f + rng.uniform();
    DevBuf dt = to_device(table), dids = to_device(ids), dout(size_t(n_tok * n_in) * 4);
    dout.poison();
    kernels::WeightView w;
    w.data = dt.as<uint8_t>();
    w.type = info->type;
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_bytes = row_bytes;
    REQUIRE(kc::get_rows(w, dids.as<int32_t>(), n_tok, scale, dout.as<float>(), nullptr));
    auto got = dout.download<float>(size_t(n_tok * n_in));
    std::vector<float> ref(size_t(n_tok * n_in));
    for (int64_t t = 0; t < n_tok; ++t) {
      qk->dequantize(table.data() + uint64_t(ids[size_t(t)]) * row_bytes, ref.data() + t * n_in, n_in);
      for (int64_t i = 0; i < n_in; ++i) ref[size_t(t * n_in + i)] *= scale;
    }
    // Tolerance: none. Decoding is exact on both sides and the scale is one IEEE multiply.
    size_t mismatches = 0, first = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (std::memcmp(&got[i], &ref[i], 4) != 0 && mismatches++ == 0) first = i;
    }
    INFO("mismatches " << mismatches << ", first at " << first << ": " << got[first] << " vs " << ref[first]);
    CHECK(mismatches == 0);
  }
  CHECK(n_types >= 13);
}

TEST_CASE("cuda ops reject bad arguments with a Status", "[gpu]") {
  if (!have_gpu()) return;
  CHECK_FALSE(kc::rms_norm(nullptr, nullptr, 1, 8, 1e-6f, nullptr, nullptr));
  CHECK_FALSE(kc::rope(nullptr, nullptr, 1, 1, 64, 1e4f, 1.0f, nullptr, true, nullptr));
  DevBuf d(64);
  CHECK_FALSE(kc::rope(d.as<float>(), d.as<int32_t>(), 1, 1, 63, 1e4f, 1.0f, nullptr, true, nullptr));
  kernels::WeightView w;
  w.data = d.as<uint8_t>();
  w.type = GgmlType::Q8_1;  // an activation format: no weight kernels (the i-quants have them now)
  w.n_in = 256;
  w.n_out = 1;
  w.row_bytes = 288;
  const Status st = kc::get_rows(w, d.as<int32_t>(), 1, 1.0f, d.as<float>(), nullptr);
  REQUIRE_FALSE(st);
  CHECK(st.message().find("get_rows") != std::string::npos);
}
