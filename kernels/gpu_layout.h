// The GPU weight layout: quantised matrices repacked once on the host (at load) into the order the
// CUDA GEMV reads (kernels/cuda/gemv_gpu.cuh), so that consecutive lanes of a warp read
// consecutive words of every stream (one L1 wavefront per 128 bytes) and scales arrive decoded.
// Plain C++ (no CUDA): compiled in every build; the weight loader calls it.
//
// Types: q3_K, q4_K, q5_K, q6_K, q8_0 and the i-quants IQ3_XXS, IQ3_S, IQ4_XS, IQ4_NL
// (gpu_layout_bytes() is 0 for every other type: they stay in the GGUF layout). Exact: decoding the repacked matrix gives the GGUF decode bit for bit
// (dequantize_gpu_layout_row below, the CUDA dequantize_rows; tests/kernels/test_gpu_layout.cpp).
//
// ---- Tiles ----
// Rows are taken 8 at a time (a row group; the last one padded with zero rows), elements in chunks
// of C = 256 (K types: one super-block) or 32 (q8_0: one block). A tile is one row group x one
// chunk; tile (G, c) lies at byte (G * n_chunks + c) * tile_bytes, n_chunks = n_in / C. Inside a
// tile, each stream starts 16-byte aligned (tile sizes are multiples of 16).
//
// Lanes: lane L = 4 g + t owns row g (0..7) of the group and, in each 32-element sub-block s of
// the chunk, the 8 elements E(s, h, i) = 32 s + 16 h + 4 t + i, h = 0, 1 (half), i = 0..3 -- the
// k positions of an int8 mma.sync B fragment (m16n8k16/k32), and what a lane pairs with one
// 32-bit word of activations per half under __dp4a. "code" below is the element's unsigned
// quant (q4_K 0..15, q5_K 0..31, q3_K 0..7 = low 2 bits | hmask bit << 2, value index q = code - 4,
// q6_K 0..63, q = code - 32); q8_0 keeps its signed int8.
//
// Slots (the K types, 8 sub-blocks per chunk): the per-lane streams below are written per slot j,
// and lane t's slot j holds sub-block j ^ 2t (its elements E(j ^ 2t, h, i)). Why: the __dp4a
// kernel sums each sub-block over its 4 lanes (so that it computes exactly what the MMA kernel
// computes, gemv_gpu.cuh), and with this rotation that is a butterfly in which every lane sends
// the same slots (4..7 to lane t ^ 2, then 2..3 to lane t ^ 1) and ends with the whole sums of
// sub-blocks 2t and 2t + 1 in slots 0 and 1 -- no per-lane selects. The MMA kernel and the
// dequantiser undo the rotation in registers once per tile (word swaps). Per-row streams (scales,
// d) are not rotated.
//
// Per-lane streams ([32 lanes][W bytes], lane L at L * W; "s" there is the slot), then per-row
// streams ([8 rows][W], s the sub-block):
//   q4_K (1152 B): qs[32][32]: word s, byte i = code E(s,0,i) | code E(s,1,i) << 4
//                  sc[8][12]:  the GGUF block's 12 packed bytes of 6-bit scales and mins, as stored
//                  dm[8][4]:   f16 d, f16 dmin
//   q5_K (1408 B): qs[32][32] as q4_K (low 4 bits); qh[32][8]: byte s, bit 4 h + i = 5th bit of
//                  E(s,h,i); sc[8][12], dm[8][4] as q4_K
//   q3_K (880 B):  w[32][16] (words W0..W3 of the lane), wh[32][8] (W4, W5); byte i of every word
//                  holds bits of element i. The 3-bit code (low 2 bits, hmask bit above) of slot s,
//                  half h, with m = s / 2 and kind = 2 (s % 2) + h, lies at: kind 0: W_m bits 0-2;
//                  kind 1: W_m bits 3-5; kind 2: W_{4 + m/2} bits 3 (m % 2) .. +2; kind 3: low bits
//                  W_m bits 6-7, hmask bit W_{4 + m/2} bit 6 + m % 2. Why: 12 of the 16 code words
//                  are one shift and mask (the first of each word only a mask), the other 4 two
//                  shifts and a merge (34 operations, where low bits and hmask in separate streams
//                  took 80); and the slot rotation stays cheap to undo: W0..W3 are permuted as words,
//                  W4 / W5 swap as words and swap their fields 0-2 / 3-5 and bits 6 / 7 per byte.
//                  sc[8][12]: the GGUF block's 12 packed bytes of 6-bit scale codes; d[8][2]: f16
//   q6_K (1680 B): ql[32][32]: as q4_K qs (low 4 bits); qh[32][16]: word s / 2, bits
//                  4 (s % 2) + 2 h + 8 i .. +1 = top 2 bits of E(s,h,i); sc[8][16]: int8 scale of
//                  sub-block 2 s + h; d[8][2]: f16
//   q8_0 (272 B):  qs[32][8]: bytes 4 h + i = q of E(0,h,i); d[8][2]: f16
// Values (as GGUF): q4_K/q5_K (d * sc) * code - dmin * m; q3_K/q6_K (d * sc) * q; q8_0 d * q.
//
// ---- i-quants ----
// Chunks of 256 (IQ3_XXS, IQ3_S, IQ4_XS: the K types' lanes, slots and rotation) or 32 (IQ4_NL, as
// q8_0). A lane's (slot j, half h) is 4 elements: one IQ3 grid entry (its 4-element group 4 h + t
// of the sub-block) with its 4 signs, or 4 IQ4 codes. The kernels' readers: cuda/gemv_gpu_iq.cuh.
//   IQ3_XXS (784 B): idx[32][16]: byte 2 j + h = grid index; sg[32][8]: sign words w0 (slots 0-3),
//                  w1 (4-7): byte i (0..2), bit (j % 4) + 4 h = sign of element i; byte 3 of w0:
//                  P bits kept by this lane, byte 3 of w1: scale codes of sub-blocks 2t (low nibble)
//                  and 2t + 1; d[8][2]: f16. The 4th sign of a group is P ^ s0 ^ s1 ^ s2, P the
//                  parity of its 4 signs: ggml's 8-sign patterns have even parity, so both halves of
//                  an 8 (lanes t, t ^ 1, same sub-block, slots j and j ^ 2) have the same P, kept once:
//                  by the even lane for h = 0, the odd lane for h = 1, at bit 4 (t % 2 ^ j / 4) + j % 4
//                  of its byte. Why: 7 bits per 8 signs as in GGUF (no extra bytes), one shuffle per
//                  tile to share them, and bit-sliced signs (a mask is a shift and a byte permute).
//   IQ3_S (880 B): idx[32][16] as IQ3_XXS (low 8 index bits); sg[32][8] as IQ3_XXS with all 4 bytes
//                  signs; qh[32][2]: bit 2 j + h = index bit 8; sc[8][4]: the GGUF scale nibbles
//                  (sub-block s at nibble s); d[8][2]: f16.
//   IQ4_XS (1088 B): qs[32][32]: word j, nibble 4 h + i = code of E(j ^ 2t, h, i) with its bits 2
//                  and 3 swapped (two byte permutes decode 4 levels, gemv_gpu_iq.cuh); per row 8 B:
//                  f16 d, u16 H (nibble k: high 2 bits of ls k | of ls k + 4 << 2), 4 bytes (byte k:
//                  low 4 bits of ls k | of ls k + 4 << 4).
//   IQ4_NL (144 B):  qs[32][4]: nibble 4 h + i = code of E(0, h, i), bits 2, 3 swapped; d[8][2]: f16.
// Values (as GGUF): IQ3_XXS d (0.5 + ls) 0.5 grid sign; IQ3_S d (1 + 2 s) grid sign; IQ4_XS
// d (ls - 32) level; IQ4_NL d level. The kernels use integer scales 2 ls + 1, 1 + 2 s, ls - 32
// with factors d / 4, d, d: d (0.5 + ls) 0.5 and (d / 4) (2 ls + 1) are the same float (each one
// rounding of d (2 ls + 1) scaled by a power of two), so the decode stays exact.
// Size: exactly the GGUF bytes of the matrix (tile = 8 x the GGUF block), plus zero rows padding
// n_out to a multiple of 8. The packed scales stay packed (the kernels decode them per tile, a few
// word operations) so that the layout costs no VRAM, pinned RAM or PCIe bytes: the planner's GGUF
// sizes hold for both layouts, and the layout can be used under any budget.
#pragma once

#include <cstdint>

#include "core/ggml_type.h"
#include "kernels/weight_view.h"

namespace strata::kernels {

inline constexpr int kGpuRowGroup = 8;

// Bytes of one tile (8 rows x one chunk) and elements per chunk; 0 when the type is not repacked.
int gpu_layout_tile_bytes(GgmlType t);
int gpu_layout_chunk(GgmlType t);
// Bytes of the repacked matrix; 0 = type not repacked (or n_in not a multiple of the chunk).
uint64_t gpu_layout_bytes(GgmlType t, int64_t n_in, int64_t n_out);

// Repacks a host GGUF-layout matrix (src.layout == kGguf, rows src.row_bytes apart) into dst, which
// holds gpu_layout_bytes(src.type, src.n_in, src.n_out) bytes (padding rows are written as zeros).
// Thread-safe (reads src, writes only dst); parallel over row groups with oneTBB. Contract
// (asserted): the type is repacked and n_in is a multiple of its chunk.
void repack_to_gpu_layout(const WeightView& src_gguf_host, uint8_t* dst_host);

// The view the CUDA kernels take for repacked bytes at `data` (device or host memory).
WeightView gpu_layout_view(const uint8_t* data, GgmlType t, int64_t n_in, int64_t n_out);

// Host decode of row r of a repacked matrix (view.layout == kGpu, host memory) into n_in floats:
// the CPU reference decoders' values bit for bit. For tests and the loader's checks.
void dequantize_gpu_layout_row(const WeightView& view, int64_t r, float* out);

}  // namespace strata::kernels
