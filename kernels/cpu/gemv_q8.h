// y = W x with int8 activations (dot_q8.h) for decode and speculative verify: the activations are
// quantised once per call (q8_act.h), then every weight row is read once and multiplied with up
// to kQ8MaxCols columns per pass (more columns: further passes over the row while it is in cache),
// kQ8MaxRows rows per kernel call, rows split by bytes over the CPU thread team (thread_team.h,
// sized like the calling thread's oneTBB arena and limit), one team job per call.
//   w: n_out rows of n_in (a type with has_dot_q8); x: (n_tok, n_in) row-major f32; y: (n_tok, n_out).
// Not exact: the f32-activation matmul (matmul.h) stays the reference; this one differs by the
// activation rounding (|error| <= d/2 per element, d = max|x|/127 per 32).
// Thread-safety: callable from any thread (a second caller while the team is busy runs alone), not
// from inside a team task; scratch for the quantised activations is thread-local to the caller.
#pragma once

#include <cstdint>

#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/max_at.h"
#include "kernels/weight_view.h"

namespace strata::kernels::cpu {

// With kernel == nullptr, best_dot_q8_rows(w.type). Asserts that the type has an int8 path.
void matmul_q8(const WeightView& w, const float* x, int64_t n_tok, float* y, DotQ8RowsFn kernel = nullptr);

// The same product on activations already quantised (x.n == w.n_in; any x.n_col >= 1).
void matmul_q8(const WeightView& w, const Q8ActView& x, float* y, DotQ8RowsFn kernel = nullptr);

// matmul_q8 of one column (x: n_in floats), y the same bits, and max_at(y, 0, n_out): each team
// part takes the maximum of the rows it just wrote (in its cache), the caller merges one candidate
// per part (the greedy head of a decode step: no serial pass over the vocabulary).
MaxAt matmul_q8_max(const WeightView& w, const float* x, float* y);

// Several matrices on the same input (Q, K, V; gate, up): the input quantised once and one
// team job over all their rows, so a decode step hands out work and joins once per group instead of
// once per matrix. Every row is computed as matmul_q8 computes it (the same kernel on the same
// row groups), so y[j] equals matmul_q8(*w[j], x, n_tok, y[j]) bit for bit. All w[j].n_in equal;
// 1 <= count <= kMaxQ8Group.
inline constexpr int kMaxQ8Group = 8;
void matmul_q8_group(const WeightView* const* w, float* const* y, int count, const float* x, int64_t n_tok);

// Building blocks for team jobs that do more around a product (gated_ffn_q8.h), so that their rows
// are computed exactly as above:
// - x quantised into the calling thread's scratch (valid until its next matmul_q8 / quantisation
//   here; parts may read it while the caller waits in team_run);
Q8ActView quantize_q8_input(const float* x, int64_t n_in, int64_t n_tok);
// - w's kernel (best_dot_q8_rows), checked against x as matmul_q8 checks it;
DotQ8RowsFn q8_kernel_for(const WeightView& w, const Q8ActView& x);
// - rows [r0, r1) of y = W x on the calling thread, r0 a multiple of kQ8MaxRows (the row groups of
//   matmul_q8's parts and of one thread's loop).
void matmul_q8_rows(const WeightView& w, const Q8ActView& x, float* y, DotQ8RowsFn kernel, int64_t r0, int64_t r1);

}  // namespace strata::kernels::cpu
