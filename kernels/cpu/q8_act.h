// Activations quantised to int8 once per matmul, for the int8-activation dot kernels (dot_q8.h).
//
// Format (strata's own; the role of ggml's Q8_0/Q8_K): a column of n activations (n a multiple of
// 32) becomes
//   q[n]      int8 codes in -127..127, q = round_half_even(x / d)
//   d[n/32]   f32 scale per 32 elements, d = max|x| / 127 over the 32 (0 for an all-zero group)
//   s[n/16]   int16 sum of the 16 codes of each half-group (the K types' offset and min terms
//             need sum(q) per weight sub-block; 16 * 127 fits int16)
// so x ~ q * d with |error| <= d / 2 per element. The three arrays of every column live in one
// caller-owned buffer (q8_act_bytes), columns after one another within each array.
//
// Thread-safety: pure; the view does not own its memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::kernels::cpu {

inline constexpr int kQ8Group = 32;   // elements per activation scale
inline constexpr int kQ8MaxCols = 16; // columns one dot_q8 call computes

struct Q8ActView {
  const int8_t* q = nullptr;   // (n_col, n)
  const float* d = nullptr;    // (n_col, n / 32)
  const int16_t* s = nullptr;  // (n_col, n / 16)
  int64_t n = 0;               // elements per column
  int n_col = 0;

  const int8_t* col_q(int c) const { return q + int64_t(c) * n; }
  const float* col_d(int c) const { return d + int64_t(c) * (n / kQ8Group); }
  const int16_t* col_s(int c) const { return s + int64_t(c) * (n / 16); }
  // Columns [c0, c0 + count) as a view of their own (same arrays, no copy).
  Q8ActView columns(int c0, int count) const {
    return {col_q(c0), col_d(c0), col_s(c0), n, count};
  }
};

// Bytes of the buffer quantize_q8_act needs for n_col columns of n elements (64-byte aligned parts).
size_t q8_act_bytes(int64_t n, int64_t n_col);

// Quantises x (n_col, n) row-major into buf (q8_act_bytes(n, n_col) bytes, 64-byte aligned) and
// returns the view of it. n must be a multiple of 32 (asserted).
Q8ActView quantize_q8_act(const float* x, int64_t n, int64_t n_col, void* buf);

// The value a code stands for (what the int8 kernels multiply the weights by): q[i] * d[i / 32].
float q8_act_value(const Q8ActView& x, int col, int64_t i);

}  // namespace strata::kernels::cpu
