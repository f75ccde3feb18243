// Element-wise and per-vector CPU ops of the forward pass. All f32, in place where noted.
// These are the reference the CUDA ops are tested against, so they favour exactness (double
// accumulation of norms) over speed where the cost is negligible next to the matmuls.
#pragma once

#include <cstdint>

namespace strata::kernels::cpu {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i] (w may be null: no weight). out may alias x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);
// rms_norm of each of n_vec consecutive vectors of length n (x into out, which may alias x), bit for
// bit: every vector's sum of squares is the same chain of double adds in the same order. The sums
// of up to 8 vectors advance side by side: one chain is bound by the add's latency (~4 cycles an
// element), and QK-norm's 64-element heads, 10 of them per layer, were a serial part of decode.
void rms_norm_vecs(const float* x, const float* w, int64_t n_vec, int64_t n, float eps, float* out);
// One vector of rms_norm_set: out = rms_norm(x, w) (w may be null; out may be x).
struct NormVec {
  const float* x;
  const float* w;
  float* out;
};
// rms_norm of `count` vectors of length n with weights of their own (QK-norm: every Q and K head of
// a row in one call), bit for bit as rms_norm on each; their chains advance up to 8 side by side,
// the sums held in registers (the group size is a template argument).
void rms_norm_set(const NormVec* vecs, int64_t count, int64_t n, float eps);

// RoPE on one head vector (length head_dim) at position `pos` (already divided by any linear
// scale). theta_i = pos * base^(-2i/head_dim) / freq_div[i] (freq_div may be null).
// neox: rotates (x[i], x[i + head_dim/2]); interleaved: rotates (x[2i], x[2i+1]).
void rope(float* x, int64_t head_dim, float pos, float base, const float* freq_div, bool neox);
// The same on n_heads consecutive head vectors of one token (the angles computed once).
void rope_heads(float* x, int64_t n_heads, int64_t head_dim, float pos, float base, const float* freq_div,
                bool neox);
// rope_heads in two halves, for callers that rotate several tensors (Q and K, every layer of one
// base) at one position: the angles depend only on (pos, base, head_dim, freq_div), and their pow,
// cos and sin in double cost more than the rotation itself. rope_heads(x, ...) equals
// rope_angles(cs, ...) then rope_apply(x, ..., cs, ...), bit for bit.
//   cos_sin: head_dim floats, (cos, sin) of each pair i < head_dim / 2.
void rope_angles(float* cos_sin, int64_t head_dim, float pos, float base, const float* freq_div);
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin, bool neox);

// gate[i] = act(gate[i]) * up[i]; long vectors split over the CPU thread team (thread_team.h: not
// from inside a team task), each element computed alone (the same bits however split). The
// activations are gated_act_impl.h's (its own e^t, scalar and AVX2 alike; within a few ulp of libm's).
void silu_mul(float* gate, const float* up, int64_t n);
void gelu_tanh_mul(float* gate, const float* up, int64_t n);
// The same on elements [i0, i1), on the calling thread (from a team part, e.g. gated_ffn_q8.h): the
// loop the functions above run on each piece, so the same bits.
using GatedActFn = void (*)(float* gate, const float* up, int64_t i0, int64_t i1);
void silu_mul_range(float* gate, const float* up, int64_t i0, int64_t i1);
void gelu_tanh_mul_range(float* gate, const float* up, int64_t i0, int64_t i1);

void add(float* x, const float* y, int64_t n);  // x += y
void scale(float* x, float s, int64_t n);       // x *= s

}  // namespace strata::kernels::cpu
