// CPU element-wise ops: RoPE over many heads at once against the one-head form and the written-out
// rotation, what a rotation must preserve, the RMS norm of many vectors against one at a time, and
// the gated activations against double precision (scalar and AVX2 alike, bit for bit).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/rng.h"
#include "kernels/cpu/attention_head.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/gated_act_impl.h"
#include "kernels/cpu/ops.h"
#include "test_util.h"

using namespace strata;
using namespace strata::kernels::cpu;

TEST_CASE("rope_heads rotates every head exactly as rope does one", "[ops]") {
  const int64_t n_heads = 5, hd = 64;
  std::vector<float> freq_div(size_t(hd / 2));
  for (size_t i = 0; i < freq_div.size(); ++i) freq_div[i] = 1.0f + 0.25f * float(i % 7);
  Rng rng(11, 2);
  std::vector<float> x(size_t(n_heads * hd));
  for (auto& v : x) v = rng.uniform() * 2.0f - 1.0f;
  for (bool neox : {false, true})
    for (const float* fd : {static_cast<const float*>(nullptr), static_cast<const float*>(freq_div.data())})
      for (float pos : {0.0f, 1.0f, 4097.0f, 131071.0f}) {
        INFO("neox " << neox << ", freq_div " << (fd != nullptr) << ", pos " << pos);
        std::vector<float> one = x, all = x;
        for (int64_t h = 0; h < n_heads; ++h) rope(one.data() + h * hd, hd, pos, 10000.0f, fd, neox);
        rope_heads(all.data(), n_heads, hd, pos, 10000.0f, fd, neox);
        CHECK(std::memcmp(one.data(), all.data(), one.size() * sizeof(float)) == 0);
        // A rotation: position 0 is the identity, and every rotated pair keeps its length.
        const int64_t half = hd / 2;
        double worst = 0;
        for (int64_t h = 0; h < n_heads; ++h)
          for (int64_t i = 0; i < half; ++i) {
            const int64_t a = h * hd + (neox ? i : 2 * i), b = h * hd + (neox ? i + half : 2 * i + 1);
            const double before = std::hypot(double(x[size_t(a)]), double(x[size_t(b)]));
            const double after = std::hypot(double(all[size_t(a)]), double(all[size_t(b)]));
            worst = std::max(worst, std::fabs(after - before));
          }
        CHECK(worst < 1e-6);
        if (pos == 0.0f) CHECK(all == x);
      }
}

// The reference rotation, written out (pow, cos and sin in double per pair, as the kernels define it).
static void rope_reference(float* x, int64_t n_heads, int64_t hd, float pos, float base, const float* fd, bool neox) {
  const int64_t half = hd / 2;
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < half; ++i) {
      double theta = double(pos) * std::pow(double(base), -2.0 * double(i) / double(hd));
      if (fd) theta /= double(fd[i]);
      const float c = float(std::cos(theta)), s = float(std::sin(theta));
      float* a = x + h * hd + (neox ? i : 2 * i);
      float* b = x + h * hd + (neox ? i + half : 2 * i + 1);
      const float x0 = *a, x1 = *b;
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
}

TEST_CASE("rope_angles + rope_apply, one table for several tensors, equal the written-out rotation", "[ops]") {
  const int64_t hd = 128;
  std::vector<float> freq_div(size_t(hd / 2));
  for (size_t i = 0; i < freq_div.size(); ++i) freq_div[i] = 1.0f + 0.5f * float(i % 5);
  Rng rng(12, 3);
  std::vector<float> q(size_t(8 * hd)), k(size_t(2 * hd)), table(static_cast<size_t>(hd));
  for (auto& v : q) v = rng.uniform() * 2.0f - 1.0f;
  for (auto& v : k) v = rng.uniform() * 2.0f - 1.0f;
  for (bool neox : {false, true})
    for (const float* fd : {static_cast<const float*>(nullptr), static_cast<const float*>(freq_div.data())})
      for (float pos : {0.0f, 3.0f, 70000.0f})
        for (float base : {10000.0f, 1000000.0f}) {
          INFO("neox " << neox << ", freq_div " << (fd != nullptr) << ", pos " << pos << ", base " << base);
          std::vector<float> q_ref = q, k_ref = k, q_out = q, k_out = k, q_heads = q;
          rope_reference(q_ref.data(), 8, hd, pos, base, fd, neox);
          rope_reference(k_ref.data(), 2, hd, pos, base, fd, neox);
          rope_angles(table.data(), hd, pos, base, fd);
          rope_apply(q_out.data(), 8, hd, table.data(), neox);
          rope_apply(k_out.data(), 2, hd, table.data(), neox);
          rope_heads(q_heads.data(), 8, hd, pos, base, fd, neox);
          CHECK(std::memcmp(q_ref.data(), q_out.data(), q.size() * sizeof(float)) == 0);
          CHECK(std::memcmp(k_ref.data(), k_out.data(), k.size() * sizeof(float)) == 0);
          CHECK(std::memcmp(q_ref.data(), q_heads.data(), q.size() * sizeof(float)) == 0);
        }
}

TEST_CASE("rms_norm_vecs equals rms_norm on each vector bit for bit, in place or not", "[ops]") {
  Rng rng(13, 4);
  for (const int64_t n_vec : {1, 2, 7, 8, 10, 17})
    for (const int64_t n : {64, 96, 512}) {
      INFO("n_vec " << n_vec << ", n " << n);
      std::vector<float> x(static_cast<size_t>(n_vec * n)), w(static_cast<size_t>(n));
      for (auto& v : x) v = (rng.uniform() * 2.0f - 1.0f) * std::exp2(rng.uniform(-8.0f, 8.0f));
      for (auto& v : w) v = rng.uniform() + 0.5f;
      for (const float* wp : {static_cast<const float*>(nullptr), static_cast<const float*>(w.data())}) {
        std::vector<float> one(x.size()), vecs(x.size(), std::nanf("")), in_place = x;
        for (int64_t v = 0; v < n_vec; ++v) rms_norm(x.data() + v * n, wp, n, 1e-6f, one.data() + v * n);
        rms_norm_vecs(x.data(), wp, n_vec, n, 1e-6f, vecs.data());
        rms_norm_vecs(in_place.data(), wp, n_vec, n, 1e-6f, in_place.data());
        CHECK(std::memcmp(one.data(), vecs.data(), one.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(one.data(), in_place.data(), one.size() * sizeof(float)) == 0);
        // And rms_norm is the definition: x / sqrt(mean(x^2) + eps) * w, the mean in double.
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += double(x[size_t(i)]) * x[size_t(i)];
        const float inv = float(1.0 / std::sqrt(ss / double(n) + 1e-6));
        CHECK(one[0] == x[0] * inv * (wp ? wp[0] : 1.0f));
      }
    }
}

// QK-norm's call: every Q and K head of a row with its own weight (or none), scattered in memory,
// up to 8 chains side by side: each vector as rms_norm gives it, in place or not, for every count
// (each group size of the templated chains, and groups past the first).
TEST_CASE("rms_norm_set equals rms_norm on each vector bit for bit, weights per vector", "[ops]") {
  Rng rng(17, 4);
  for (const int64_t count : {1, 2, 3, 5, 8, 9, 10, 16, 21})
    for (const int64_t n : {64, 256}) {
      INFO("count " << count << ", n " << n);
      std::vector<float> x(static_cast<size_t>(count * n)), wq(static_cast<size_t>(n)), wk(wq.size());
      for (auto& v : x) v = (rng.uniform() * 2.0f - 1.0f) * std::exp2(rng.uniform(-8.0f, 8.0f));
      for (auto& v : wq) v = rng.uniform() + 0.5f;
      for (auto& v : wk) v = rng.uniform() + 0.5f;
      for (const bool in_place : {false, true}) {
        std::vector<float> want(x.size()), got = in_place ? x : std::vector<float>(x.size(), std::nanf(""));
        std::vector<NormVec> vecs;
        // Vectors in reverse order of their storage, weights q, k or none by index.
        for (int64_t v = count - 1; v >= 0; --v) {
          const float* w = v % 3 == 0 ? wq.data() : v % 3 == 1 ? wk.data() : nullptr;
          rms_norm(x.data() + v * n, w, n, 1e-6f, want.data() + v * n);
          vecs.push_back({in_place ? got.data() + v * n : x.data() + v * n, w, got.data() + v * n});
        }
        rms_norm_set(vecs.data(), count, n, 1e-6f);
        CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
      }
    }
}

namespace {

// act(g) * u in double. GELU's tanh form 0.5 g (1 + tanh z) as 1 / (1 + e^-2z): the same function,
// but 1 + tanh z cancels to nothing in double too from z ~ -18 on.
double gelu_tanh_mul_ref(double g, double u) {
  const double z = 0.7978845608028654 * (g + 0.044715 * g * g * g);
  return g / (1.0 + std::exp(-2.0 * z)) * u;
}
double silu_mul_ref(double g, double u) { return g / (1.0 + std::exp(-g)) * u; }

// Gates over the activations' whole working range and their edges: normal values, large and tiny
// magnitudes, the exp clamp's neighbourhood (|2z| near 87-88), zeros; ups of either sign.
std::vector<float> activation_inputs(Rng& rng, size_t n) {
  std::vector<float> g = test::random_normal(n, rng, 4.0f);
  const float edges[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, -7.0f, -6.5f, 6.5f, -40.0f, -87.5f, -88.5f,
                         87.5f, 88.5f, -100.0f, 100.0f, 1e4f, -1e4f, 1e13f, -1e13f, 3e38f, -3e38f};
  for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]) && i < n; ++i) g[i * 7 % n] = edges[i];
  return g;
}

}  // namespace

TEST_CASE("gated activations: within 8 ulp (plus the exponent's rounding) of double precision", "[ops]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const size_t n = 20011;  // odd: the vector loop's scalar tail runs too
  const std::vector<float> g = activation_inputs(rng, n), u = test::random_normal(n, rng);
  for (bool gelu : {true, false}) {
    INFO((gelu ? "gelu_tanh" : "silu"));
    std::vector<float> y = g;
    (gelu ? gelu_tanh_mul : silu_mul)(y.data(), u.data(), int64_t(n));
    int bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const double want = gelu ? gelu_tanh_mul_ref(g[i], u[i]) : silu_mul_ref(g[i], u[i]);
      const bool finite = std::isfinite(want) && std::abs(want) < 3e38;
      if (!finite) continue;  // g * u beyond float: no claim
      // 8 ulp, plus what rounding the exponent t costs in float: e^t moves by |t| 2^-24 per ulp of
      // t, and t = -2z (GELU) gathers ~4 roundings (g^3 and the products): GELU at g = -7 has
      // t = 36, so its float value is only good to ~4e-6 whatever computes e^t (libm's tanhf too).
      const double t = gelu ? 2.0 * 0.7978845608028654 * (double(g[i]) + 0.044715 * double(g[i]) * g[i] * g[i])
                            : double(g[i]);
      const double rel = 1e-6 + (gelu ? 4.0 : 1.0) * std::abs(t) * 0x1p-24;
      const double err = std::abs(double(y[i]) - want);
      if (!(err <= 1e-35 + rel * std::abs(want))) {
        if (bad++ < 5) UNSCOPED_INFO("g " << g[i] << " u " << u[i] << ": " << y[i] << " want " << want);
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("gated activations: the AVX2 lanes give the scalar form's bits", "[ops]") {
  if (!cpu_features().avx2) return;
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const size_t n = 4099;
  const std::vector<float> g = activation_inputs(rng, n), u = test::random_normal(n, rng);
  for (bool gelu : {true, false}) {
    INFO((gelu ? "gelu_tanh" : "silu"));
    std::vector<float> vec = g, scalar(n);
    (gelu ? gelu_tanh_mul_range_avx2 : silu_mul_range_avx2)(vec.data(), u.data(), 3, int64_t(n));
    for (size_t i = 0; i < n; ++i)
      scalar[i] = i < 3 ? g[i] : gelu ? gated_act::gelu_tanh_mul1(g[i], u[i]) : gated_act::silu_mul1(g[i], u[i]);
    int differ = 0;
    for (size_t i = 0; i < n; ++i) differ += std::memcmp(&vec[i], &scalar[i], 4) != 0;
    CHECK(differ == 0);
  }
}

TEST_CASE("softmax weights: e^t within 3 ulp from -87 to 0, +0 below, NaN kept, AVX2 lanes with the scalar bits", "[ops]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  std::vector<float> t(30011);
  for (auto& v : t) v = -90.0f * rng.uniform();
  const float edges[] = {0.0f, -0.0f, -1e-30f, -86.99f, -87.0f, -87.01f, -88.0f, -1e30f, -INFINITY, NAN};
  for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); ++i) t[i * 11] = edges[i];
  int bad = 0;
  for (float x : t) {
    const float got = fast_exp::exp_weight(x);
    if (std::isnan(x)) {
      bad += !std::isnan(got);
    } else if (x < fast_exp::kExpLo) {
      bad += !(got == 0.0f && !std::signbit(got));
    } else {
      const double want = std::exp(double(x));
      bad += !(std::abs(got - want) <= 3.0 * 0x1p-24 * want);
    }
  }
  CHECK(bad == 0);
  if (cpu_features().avx2) {
    // exp_shifted runs the lanes (and the scalar form on the last n % 8): the scalar form's bits.
    std::vector<float> s = t;
    exp_shifted(s.data(), int64_t(s.size()), 0.5f);
    int differ = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      const float want = fast_exp::exp_weight(t[i] - 0.5f);
      differ += std::isnan(want) ? !std::isnan(s[i]) : std::memcmp(&s[i], &want, 4) != 0;
    }
    CHECK(differ == 0);
  }
}
