// Activations quantised to int8 once per matmul, for the int8-activation dot kernels (dot_q8.h).
//
// Format (strata's own; the role of ggml's Q8_0/Q8_K): a column of n activations (n a multiple of
// 32) becomes
//   q[n]      int8 codes in -127..127, q = round_half_even(x / d), stored in the lane order below
//   d[n/32]   f32 scale per 32 elements, d = max|x| / 127 over the 32 (0 for an all-zero group)
//   s[n/16]   int16 sum of the 16 codes of each half-group (the K types' offset and min terms
//             need sum(q) per weight sub-block; 16 * 127 fits int16)
//   sf[n/32]  f32 float(s[2g] + s[2g+1]) * d[g]: the group's activation sum, for the min terms of
//             Q4_K / Q5_K (dot_q8.h)
// so x ~ q * d with |error| <= d / 2 per element. The three arrays of every column live in one
// caller-owned buffer (q8_act_bytes), columns after one another within each array.
//
// Lane order of q (q8_act_pos): each whole 256-element chunk (8 groups of 32) is stored as eight
// 32-byte vectors v = 2k + p (p = 0, 1: the quad of groups 4p..4p+3; k = 0..3); byte 4L + i of
// vector v (lane L = 0..7, i = 0..3) holds element 4k + i of half-group L / 4 of group 4p + L % 4.
// So in every vector a 4-byte lane belongs to one group (lanes 0-3 and 4-7: the two halves of
// groups 4p..4p+3), and the dot kernels (dot_q8_x86.inc) sum a group's products lane-wise, after
// one transpose of each weight block that serves every column, instead of a horizontal reduction
// per column. The two quads' vectors k are adjacent, so one 64-byte load (AVX-512) covers all eight
// groups: 16 int32 lanes, one per half-group. A last half chunk (n mod 256 = 128: gemma3-1b's 1152,
// qwen2.5-0.5b's 896, blocks of 32 only) is one quad in that order, its vectors 32 bytes apart
// (vector k at byte 32k: the quad's 4 groups as a whole chunk's quad 0, without quad 1 between), so
// the kernels take it as half a chunk rather than block by block. Any other last n mod 256 elements
// stay in element order. d and s are in element order.
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
  const float* sf = nullptr;   // (n_col, n / 32)
  int64_t n = 0;               // elements per column
  int n_col = 0;

  const int8_t* col_q(int c) const { return q + int64_t(c) * n; }  // in lane order (q8_act_pos)
  const float* col_d(int c) const { return d + int64_t(c) * (n / kQ8Group); }
  const int16_t* col_s(int c) const { return s + int64_t(c) * (n / 16); }
  const float* col_sf(int c) const { return sf + int64_t(c) * (n / kQ8Group); }
  // Columns [c0, c0 + count) as a view of their own (same arrays, no copy).
  Q8ActView columns(int c0, int count) const {
    return {col_q(c0), col_d(c0), col_s(c0), col_sf(c0), n, count};
  }
};

// The lane quads of the 256-element chunk of a column of n that starts at element chunk: 2 for a
// whole chunk, 1 for a last half chunk (n mod 256 = 128), 0 where the last elements stay in element
// order (the lane order above).
inline int q8_act_quads(int64_t n, int64_t chunk) {
  if (chunk + 256 <= n) return 2;
  return n - chunk == 128 ? 1 : 0;
}

// Where element i of a column of n lies in its q array: in a chunk of `quads` quads, element
// 16h + 4k + j of group g goes to vector quads * k + g / 4, lane g % 4 + 4h, byte j.
inline int64_t q8_act_pos(int64_t n, int64_t i) {
  const int64_t chunk = i / 256 * 256;
  const int quads = q8_act_quads(n, chunk);
  if (quads == 0) return i;
  const int64_t e = i - chunk, group = e / 32, half = (e % 32) / 16, k = (e % 16) / 4;
  return chunk + 32 * (quads * k + group / 4) + 4 * (group % 4 + 4 * half) + e % 4;
}
inline int8_t q8_act_code(const Q8ActView& x, int c, int64_t i) { return x.col_q(c)[q8_act_pos(x.n, i)]; }

// Bytes of the buffer quantize_q8_act needs for n_col columns of n elements (64-byte aligned parts).
size_t q8_act_bytes(int64_t n, int64_t n_col);

// The view of buf laid out for n_col columns of n (what quantize_q8_act fills), before it is filled:
// for quantize_q8_act_range. n must be a multiple of 32 (asserted).
Q8ActView q8_act_layout(int64_t n, int64_t n_col, void* buf);

// Quantises x (n_col, n) row-major into buf (q8_act_bytes(n, n_col) bytes, 64-byte aligned) and
// returns the view of it. n must be a multiple of 32 (asserted). AVX2 where cpu_features() has it
// (STRATA_CPU=scalar turns it off), the same bits as the portable loop for finite x.
Q8ActView quantize_q8_act(const float* x, int64_t n, int64_t n_col, void* buf);
// Elements [i0, i1) of column c of x (n_col, n) row-major (i0, i1 multiples of 32) into out's
// buffer (q8_act_layout): the bytes quantize_q8_act(x, ...) writes for those groups, and no others.
// So the producer of an activation can quantise it piece by piece, in parallel: disjoint ranges touch
// disjoint bytes (a thread team's parts may each do their own).
void quantize_q8_act_range(const float* x, const Q8ActView& out, int c, int64_t i0, int64_t i1);
// The portable loop alone, on any CPU: what quantize_q8_act must equal (tests).
Q8ActView quantize_q8_act_portable(const float* x, int64_t n, int64_t n_col, void* buf);

// The value a code stands for (what the int8 kernels multiply the weights by): q[i] * d[i / 32].
float q8_act_value(const Q8ActView& x, int col, int64_t i);

}  // namespace strata::kernels::cpu
