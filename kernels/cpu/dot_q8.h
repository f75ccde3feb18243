// Dot products of quantised weight rows with int8 activations (q8_act.h), for decode and
// speculative verify: one call computes one weight row against 1..16 activation columns, decoding
// each weight block once for all of them. Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL (blocks of
// 32), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M
// (super-blocks of 256). The others (f16, bf16, f32) have no int8 path: has_dot_q8() is false and
// callers use the exact f32 kernels, quant_kernels.h.
//
// The arithmetic, shared bit for bit by the scalar reference and every SIMD kernel:
// - K types (256-element super-blocks; 16 half-groups h of 16, 8 groups g of 32): the weight codes
//   are made unsigned (u = q + offset: Q6_K 32, Q3_K 4, Q2_K/Q4_K/Q5_K 0; the i-quants keep signed
//   values as u, offset 0: IQ4_XS kValuesIq4nl[q], IQ3_* and IQ2_* grid * sign, IQ1_* 8 * grid +-
//   1, below) and per group
//     isum_g = sum_{h in g} sc_h * sum_{i in h} u_i * xq_i  -  sum_{h in g} sc_h * offset * S_h
//     mint_g = sum_{h in g} m_h * S_h                        (Q2_K mins, else 0)
//   (S_h: the activation sums of q8_act.h; sc_h, m_h: the half-group's scale and min, Q4_K / Q5_K /
//   IQ4_XS / IQ3_* / IQ2_XXS / IQ1_S giving both halves of a group the group's: IQ4_XS sc = ls - 32,
//   the grid types sc = 2s + 1, per half-group for IQ2_XS / IQ2_S / IQ1_M), exact in int32 (e.g.
//   IQ2_*: |isum_g| <= 32 * 43 * 127 * 31 < 2^23). Then, in f32, per lane g of eight (d: the
//   super-block scale, IQ3_XXS d / 4, IQ2_* and IQ1_* d / 8, exact for an f16 d):
//     acc_g  = fma(float(isum_g) * dx_g, d, acc_g);  accm_g = fma(float(mint_g) * dx_g, dmin, accm_g)
//   except Q4_K / Q5_K, whose min m_g is one per group: accm_g = fma(float(m_g) * dmin, sf_g, accm_g)
//   with sf_g the group's activation sum (q8_act.h), one fma per column where the others take four;
//   over the super-blocks, and the result is hsum8(acc - accm), hsum8 adding lanes (0+4, 1+5, 2+6,
//   3+7), then (0+2, 1+3), then (0+1).
//   IQ2_*'s d * (0.5 + s) * 0.25 is (d / 8) * (2s + 1). IQ1_S / IQ1_M's d * (2s + 1) * (g + delta),
//   g in {-1, 0, 1} and delta = +-1/8 (per group of 32 / of 8), is (d / 8) * (2s + 1) * (8g +- 1):
//   the grid scaled by 8, so the delta is an integer inside the code (|w| <= 9) and needs no term
//   of its own. (Carrying it through the activation sums instead, as the offsets are, would need
//   sums per 8 elements for IQ1_M's per-entry delta; q8_act.h keeps them per 16.)
// - Blocks of 32 (scale d_w; codes w in element order: signed for Q4_0 (q - 8), Q5_0 (q - 16), Q8_0
//   and IQ4_NL (kValuesIq4nl[q]); unsigned q for Q4_1 / Q5_1): block b goes to lane b mod 8 of
//   eight f32 lanes per column: isum_b = sum over its 32 elements of w_i * xq_i (exact int32) and
//   acc = fma(float(isum_b), d_w * dx_b, acc). Q4_1 / Q5_1 add their min m_b through block b's
//   activation sum, in eight more lanes, block b in lane b mod 8 again:
//   accm = fma(float(S_2b + S_2b+1), m_b * dx_b, accm). The result is hsum8(acc), plus hsum8(accm)
//   for Q4_1 / Q5_1.
// Only the exact integers isum depend on how a kernel sums; the SIMD kernels read the activations in
// q8_act.h's lane order, where a group's (a block's) products stay in its own 4-byte lanes.
// So a SIMD kernel equals the scalar one exactly (the tests require it) and differs from
// dequantise-then-dot on the same int8-rounded activations only by f32 rounding.
//
// Contract: row is one weight row of x.n elements (a multiple of the type's block size); 1 <=
// x.n_col <= kQ8MaxCols; y[c * y_stride] receives column c. Pure; alignment as quant_kernels.h.
#pragma once

#include <cstdint>

#include "core/ggml_type.h"
#include "kernels/cpu/q8_act.h"
#include "kernels/cpu/quant_kernels.h"

namespace strata::kernels::cpu {

using DotQ8Fn = void (*)(const void* row, const Q8ActView& x, float* y, int64_t y_stride);
// The same for 1 <= n_rows <= kQ8MaxRows rows at once (row r at rows + r * row_bytes), column c of
// row r to y[c * y_stride + r]; each row's result is the one DotQ8Fn gives it. Several rows per
// call let the SIMD kernels keep one super-block of every column's activations in L1 for all of them.
using DotQ8RowsFn = void (*)(const void* rows, int64_t row_bytes, int n_rows, const Q8ActView& x, float* y,
                             int64_t y_stride);
inline constexpr int kQ8MaxRows = 8;

// X(type suffix): the types with int8-activation kernels.
#define STRATA_CPU_Q8_TYPES(X) \
  X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(iq4_nl) X(q2_k) X(q3_k) X(q4_k) X(q5_k) X(q6_k) X(iq4_xs) \
      X(iq3_xxs) X(iq3_s) X(iq2_xxs) X(iq2_xs) X(iq2_s) X(iq1_s) X(iq1_m)

#define STRATA_DECLARE_Q8_KERNELS(t)                                                        \
  void dot_q8_##t##_scalar(const void* row, const Q8ActView& x, float* y, int64_t y_stride); \
  void dot_q8_##t##_avx2(const void* row, const Q8ActView& x, float* y, int64_t y_stride);     \
  void dot_q8_##t##_avxvnni(const void* row, const Q8ActView& x, float* y, int64_t y_stride);  \
  void dot_q8_##t##_avx512vnni(const void* row, const Q8ActView& x, float* y, int64_t y_stride); \
  void dot_q8_rows_##t##_scalar(const void*, int64_t, int, const Q8ActView&, float*, int64_t);  \
  void dot_q8_rows_##t##_avx2(const void*, int64_t, int, const Q8ActView&, float*, int64_t);    \
  void dot_q8_rows_##t##_avxvnni(const void*, int64_t, int, const Q8ActView&, float*, int64_t); \
  void dot_q8_rows_##t##_avx512vnni(const void*, int64_t, int, const Q8ActView&, float*, int64_t);
STRATA_CPU_Q8_TYPES(STRATA_DECLARE_Q8_KERNELS)
#undef STRATA_DECLARE_Q8_KERNELS

// How the x86 kernels of the types with 4-byte grid entries (IQ3_XXS, IQ3_S) read those entries:
// one vpgatherdd per vector (fast on recent Intel cores), or eight scalar-indexed loads blended
// into place (faster where gathers are slow, as on AMD Zen; dot_q8_x86.inc's direct4). Both give the same bits; each is
// built (the _direct kernels below: the same names with t##_direct, the plain names gather) and
// one is picked per process (iq3_grid_load). The other types have one way and ignore it.
enum class GridLoad : int { gather = 0, direct = 1 };
inline constexpr int kGridLoadCount = 2;
const char* grid_load_name(GridLoad load);
#define STRATA_CPU_Q8_GRID4_TYPES(X) X(iq3_xxs) X(iq3_s)
#define STRATA_DECLARE_Q8_DIRECT(t) STRATA_DECLARE_Q8_SIMD(t##_direct)
#define STRATA_DECLARE_Q8_SIMD(t)                                                                \
  void dot_q8_##t##_avx2(const void* row, const Q8ActView& x, float* y, int64_t y_stride);       \
  void dot_q8_##t##_avxvnni(const void* row, const Q8ActView& x, float* y, int64_t y_stride);    \
  void dot_q8_##t##_avx512vnni(const void* row, const Q8ActView& x, float* y, int64_t y_stride); \
  void dot_q8_rows_##t##_avx2(const void*, int64_t, int, const Q8ActView&, float*, int64_t);    \
  void dot_q8_rows_##t##_avxvnni(const void*, int64_t, int, const Q8ActView&, float*, int64_t); \
  void dot_q8_rows_##t##_avx512vnni(const void*, int64_t, int, const Q8ActView&, float*, int64_t);
STRATA_CPU_Q8_GRID4_TYPES(STRATA_DECLARE_Q8_DIRECT)
#undef STRATA_DECLARE_Q8_SIMD
#undef STRATA_DECLARE_Q8_DIRECT

// The builds of these kernels, slowest first. avx2: vpmaddubsw + vpmaddwd; avx_vnni: VEX vpdpbusd
// (Alder Lake, Sapphire Rapids, Zen 5); avx512_vnni (AVX512_VNNI + BW + VL: Ice Lake, Sapphire
// Rapids, Zen 4): for 3+ columns a 512-bit body, two columns per register (dot_q8_zmm.inc), else
// the ymm body with EVEX vpdpbusd. All return the same bits. STRATA_CPU=avx2 caps at avx2 (no
// VNNI), =scalar at scalar.
enum class Q8Isa : int { scalar = 0, avx2 = 1, avx_vnni = 2, avx512_vnni = 3 };
inline constexpr int kQ8IsaCount = 4;
const char* q8_isa_name(Q8Isa isa);
bool q8_isa_supported(Q8Isa isa);  // by this CPU and the STRATA_CPU cap

bool has_dot_q8(GgmlType type);
// The kernel of one build (nullptr where the type has none; every build exists for the types of
// has_dot_q8, but only the supported ones may be called), with the process's grid load
// (iq3_grid_load), or with a given one (tests, benchmarks; the scalar build ignores it).
DotQ8Fn dot_q8_kernel(GgmlType type, Q8Isa isa);
DotQ8RowsFn dot_q8_rows_kernel(GgmlType type, Q8Isa isa);
DotQ8Fn dot_q8_kernel(GgmlType type, Q8Isa isa, GridLoad load);
DotQ8RowsFn dot_q8_rows_kernel(GgmlType type, Q8Isa isa, GridLoad load);
// The fastest kernel this CPU supports (and the STRATA_CPU cap allows); nullptr without a path.
DotQ8Fn best_dot_q8(GgmlType type);
DotQ8RowsFn best_dot_q8_rows(GgmlType type);
// Which build best_dot_q8 picks (for reports).
Q8Isa best_dot_q8_isa(GgmlType type);

// The grid load of type's kernels in this process, chosen once per type on first use
// (dot_q8_grid_pick.cpp): STRATA_IQ3_GRID=gather|direct where set, else whichever ran faster in a
// ~1 ms timing of both on this CPU (best_dot_q8_isa's build, cache-resident rows). gather for the
// types without a choice and where best_dot_q8_isa is scalar. Thread-safe.
GridLoad iq3_grid_load(GgmlType type);
// Whether iq3_grid_load(type) came from STRATA_IQ3_GRID, and the timings behind a measured pick
// (ns per super-block row, one column; 0 where not measured), for reports.
struct GridLoadPick {
  GridLoad load = GridLoad::gather;
  bool from_env = false;
  double gather_ns = 0, direct_ns = 0;
};
GridLoadPick iq3_grid_pick(GgmlType type);

}  // namespace strata::kernels::cpu
