// Quantisers of the i-quants with an importance matrix: the grid types (IQ3_XXS, IQ3_S, IQ2_XXS,
// IQ2_XS, IQ2_S, IQ1_S, IQ1_M; iq_grid_quant.cpp) and IQ4_NL / IQ4_XS (iq4_quant.cpp).
//
// `importance` holds one non-negative value per element of the row (the mean squared activation
// of the weight's input column, as `strata imatrix` writes it; the same vector for every row of a
// tensor), or is nullptr for uniform importance. With it, the grid types weight each weight's error
// by importance[j] * sqrt(sigma2 + x[j]^2) (sigma2: the super-block's mean square), which keeps
// large weights of important columns accurate, and IQ4_NL / IQ4_XS by importance[j] alone (the
// error a matmul sees; iq4_quant.cpp says why); without it, by 1, so the plain squared error of
// the row is what is minimised.
//
// Thread-safety: pure functions (the grid neighbour tables are built once, thread-safely, on first
// use). n: a multiple of the type's block size.
#pragma once

#include <cstdint>

#include "core/ggml_type.h"

namespace strata::kernels::cpu {

using QuantizeWeightedFn = void (*)(const float* src, void* dst, int64_t n, const float* importance);

// nullptr where strata has no quantiser for the type; for the types without an importance-aware
// quantiser (legacy, K, float) it is nullptr too: callers use QuantKernels::quantize there.
QuantizeWeightedFn quantize_weighted(GgmlType type);

// The types llama.cpp refuses to quantise without an importance matrix (IQ2_XXS, IQ2_XS, IQ1_S):
// their quality without one is poor, and `strata quantize` warns.
bool wants_importance(GgmlType type);

void quantize_iq2_xxs_w(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq2_xs_w(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq2_s_w(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq3_xxs_w(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq3_s_w(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq1_s_w(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq1_m_w(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq4_nl_w(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq4_xs_w(const float* src, void* dst, int64_t n, const float* importance);

// The error weights of the grid-type quantisers (IQ4 uses the floored importance alone):
// importance_floor: a tiny fraction (1e-6) of the row's mean importance, raised to so that a column
// that never fired still gets a defined, near-free choice; 0 when imp is null or all zero (then
// the callers quantise with uniform weights).
float importance_floor(const float* imp, int64_t n);
// w[j] = max(imp[j], imp_floor) * sqrt(sigma2 + x[j]^2) over a block of len values, sigma2 their
// mean square.
void importance_weights(const float* x, const float* imp, float imp_floor, int len, float* w);

}  // namespace strata::kernels::cpu
