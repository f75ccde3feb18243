#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/thread_team.h"

namespace strata::kernels::cpu {

namespace {

// The gated activations cost 10-20 ns an element (exp, tanh): at a decode step's FFN width that is
// tens of microseconds, the largest serial piece of a small model's step, so they go to the thread
// team in runs of at least this many elements. Each element is computed alone: any split gives
// the same bits.
constexpr int64_t kMinActElems = 256;

template <typename Fn>
void elementwise(int64_t n, Fn fn) {
  const int parts = int(std::clamp<int64_t>(n / kMinActElems, 1, team_threads()));
  const team_profile::Label label("elementwise");
  team_run(parts, [&](int p) { fn(n * p / parts, n * (p + 1) / parts); });
}

// The scale rms_norm applies for a sum of squares ss of n elements.
float rms_inv(double ss, int64_t n, float eps) { return float(1.0 / std::sqrt(ss / double(n) + double(eps))); }

void scale_by(const float* x, const float* w, int64_t n, float inv, float* out) {
  if (w) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  }
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  scale_by(x, w, n, rms_inv(ss, n, eps), out);
}

namespace {

// kSide vectors' sums of squares, each its own chain in element order (rms_norm's), side by side.
template <int kSide>
void norm_side(const NormVec* v, int64_t n, float eps) {
  double ss[kSide] = {};
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < kSide; ++j) {
      const float e = v[j].x[i];
      ss[j] += double(e) * e;
    }
  for (int j = 0; j < kSide; ++j) scale_by(v[j].x, v[j].w, n, rms_inv(ss[j], n, eps), v[j].out);
}

constexpr int kMaxSide = 8;

}  // namespace

void rms_norm_set(const NormVec* vecs, int64_t count, int64_t n, float eps) {
  using SideFn = void (*)(const NormVec*, int64_t, float);
  static constexpr SideFn kSides[kMaxSide] = {norm_side<1>, norm_side<2>, norm_side<3>, norm_side<4>,
                                              norm_side<5>, norm_side<6>, norm_side<7>, norm_side<8>};
  for (int64_t v0 = 0; v0 < count; v0 += kMaxSide) kSides[std::min<int64_t>(kMaxSide, count - v0) - 1](vecs + v0, n, eps);
}

void rms_norm_vecs(const float* x, const float* w, int64_t n_vec, int64_t n, float eps, float* out) {
  NormVec vecs[kMaxSide];
  for (int64_t v0 = 0; v0 < n_vec; v0 += kMaxSide) {
    const int64_t nv = std::min<int64_t>(kMaxSide, n_vec - v0);
    for (int64_t j = 0; j < nv; ++j) vecs[j] = {x + (v0 + j) * n, w, out + (v0 + j) * n};
    rms_norm_set(vecs, nv, n, eps);
  }
}

void rope(float* x, int64_t head_dim, float pos, float base, const float* freq_div, bool neox) {
  rope_heads(x, 1, head_dim, pos, base, freq_div, neox);
}

void rope_heads(float* x, int64_t n_heads, int64_t head_dim, float pos, float base, const float* freq_div,
                bool neox) {
  // The angles depend on the position and the pair only: computed once for every head (pow, cos
  // and sin in double were most of RoPE's time when done per head).
  static thread_local std::vector<float> cos_sin;
  cos_sin.resize(size_t(head_dim));
  rope_angles(cos_sin.data(), head_dim, pos, base, freq_div);
  rope_apply(x, n_heads, head_dim, cos_sin.data(), neox);
}

void rope_angles(float* cos_sin, int64_t head_dim, float pos, float base, const float* freq_div) {
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    // Angles in double: positions reach 128K and f32 would lose the low bits of pos * freq.
    double theta = double(pos) * std::pow(double(base), -2.0 * double(i) / double(head_dim));
    if (freq_div) theta /= double(freq_div[i]);
    cos_sin[2 * i] = float(std::cos(theta));
    cos_sin[2 * i + 1] = float(std::sin(theta));
  }
}

void rope_apply(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin, bool neox) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      float* a = neox ? &xh[i] : &xh[2 * i];
      float* b = neox ? &xh[i + half] : &xh[2 * i + 1];
      const float x0 = *a, x1 = *b;
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  elementwise(n, [&](int64_t i0, int64_t i1) { silu_mul_range(gate, up, i0, i1); });
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  elementwise(n, [&](int64_t i0, int64_t i1) { gelu_tanh_mul_range(gate, up, i0, i1); });
}

void add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace strata::kernels::cpu
