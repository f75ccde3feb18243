// Shared search routines of the CPU quantisers: choose the scale (and offset) of a group of values
// and the integer codes that minimise the weighted squared error sum w * (x - y)^2.
//
// The method, for every routine here:
//   1. a grid of candidate inverse scales around "the extreme value maps onto the last code";
//      each candidate's codes are the nearest ones, then the scale (and offset) is refitted to
//      those codes by weighted least squares and the error taken in closed form;
//   2. from the best candidate, alternate "nearest codes for this scale" / "least-squares scale
//      for these codes" while the error falls (each step can only lower it);
//   3. for stored (f16 / few-bit) scales, the final choice is made with the *stored* values: f16
//      neighbours of the rounded scale, and for the K types each sub-block's integer scale (and
//      min) is chosen among the neighbours of its ideal value by the error it actually gives,
//      with a least-squares refit of the super-block scales in between.
// The error measured is the one of the dequantised values, so the result is never worse than
// "round the float scale and requantise", which is what the reference quantisers of ggml do.
//
// w == nullptr means unit weights. Group sizes are at most kMaxGroup; super-blocks at most 256.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace strata::kernels::cpu {

inline constexpr int kMaxGroup = 256;

// ---- one group, float scale ------------------------------------------------------------------

// x ≈ scale * q, integer q in [qmin, qmax] (qmin < 0 < qmax). The scale may come out negative:
// its sign picks which end of an asymmetric range ([-8, 7]) takes the extreme value.
// Writes the codes (nearest for the returned scale); returns the scale (0 for an all-zero group).
float fit_scale(const float* x, const float* w, int n, int qmin, int qmax, int8_t* q);

// x ≈ scale * q - min, integer q in [0, qmax], scale >= 0. When min_nonneg, min is constrained
// to >= 0 (the K types store the min as an unsigned amount subtracted), else it is free.
struct ScaleMin {
  float scale;
  float min;
};
ScaleMin fit_scale_min(const float* x, const float* w, int n, int qmax, bool min_nonneg,
                       uint8_t* q);

// ---- one block with f16 scale(s) (legacy types) ----------------------------------------------

// x ≈ f16(d) * q, q in [qmin, qmax]. Returns the f16 bits of d; writes the codes.
uint16_t quantize_block_scale_f16(const float* x, int n, int qmin, int qmax, int8_t* q);

// x ≈ f16(d) * q + f16(m), q in [0, qmax]. Writes the f16 bits of d and m and the codes.
void quantize_block_scale_min_f16(const float* x, int n, int qmax, uint16_t* d, uint16_t* m,
                                  uint8_t* q);

// ---- one K super-block: f16 super-scale(s) times integer sub-block scales --------------------

// y = (d * ls[j]) * q, q in [qmin, qmax], ls[j] in [ls_min, ls_max] (Q3_K, Q6_K).
struct SymSuperSpec {
  int n_sub;
  int sub_len;
  int qmin, qmax;
  int ls_min, ls_max;
};
// Returns the f16 bits of d; writes n_sub scales and n_sub * sub_len codes.
uint16_t quantize_super_scale(const float* x, const SymSuperSpec& spec, int* ls, int8_t* q);

// y = (d * ls[j]) * q - (dmin * lm[j]), q in [0, qmax], ls in [0, ls_max], lm in [0, lm_max]
// (Q2_K, Q4_K, Q5_K).
struct AffineSuperSpec {
  int n_sub;
  int sub_len;
  int qmax;
  int ls_max, lm_max;
};
// Writes the f16 bits of d and dmin, n_sub scales and mins and n_sub * sub_len codes.
void quantize_super_scale_min(const float* x, const AffineSuperSpec& spec, uint16_t* d,
                              uint16_t* dmin, int* ls, int* lm, uint8_t* q);

}  // namespace strata::kernels::cpu
