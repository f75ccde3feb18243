// Activations rounded to int8 by the kernel that produces them: the RMS norm before Q/K/V and
// gate/up, and the gated activation before the down matrix, write the GEMV's int8 activations
// (codes in the weight layout's lane order, per-32 scales, per-16 sums) as an epilogue, so that the
// GEMV after them skips its quantiser (matmul(..., reuse_act = true)). A decode step ran ~19
// kernels per layer, most of them tiny and latency-bound; this takes the quantisers off the
// critical path. The codes are exactly those of matmul's own quantiser (same float operations on
// the same values), so a fused and an unfused step give the same bits.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_api.h"

namespace strata::kernels::cuda {

// Where matmul(w, x, n_cols, y, ws) keeps x's int8 rounding in ws. q == nullptr where matmul would
// not round x into ws (float weights, the f16 GEMM for many columns, too small a workspace).
struct ActRounding {
  int8_t* q = nullptr;  // (n_cols, n_in) codes, per chunk of perm_chunk elements in lane order
  float* d = nullptr;   // (n_cols, n_in / 32) scales
  int* s16 = nullptr;   // (n_cols, n_in / 16) sums of the codes
  int perm_chunk = 0;   // 0: element order; 32 or 256: matmul_internal.h ActGpu's lane order
  int key = 0;          // matmul_act_key(w, n_cols, ws)
};
ActRounding act_rounding(const WeightView& w, int n_cols, Workspace ws);

// x's rounding into r, as matmul's own quantiser makes it (for matrices read side by side).
Status round_act(const float* d_x, int64_t n, const ActRounding& r, Stream s);

// out = rms_norm(x) * w (rms_norm's semantics; w may be null) and, where r.q, out's rounding into r
// (r for the n_vec x n matrix out). The sum of squares is in double, one block per vector, each
// thread's elements held in registers between the two passes.
Status rms_norm_round(const float* d_x, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_out,
                      const ActRounding& r, Stream s);

// The residual add of one block and the input norm of the next: x += rms_norm(h) * post_w (post:
// rms_norm_add's semantics; post_w may be null) or x += h (!post: add's), then out = rms_norm(x) * w
// and, where r.q, its rounding; the same bits as those ops one after the other. out may alias h,
// not x.
Status add_rms_norm_round(float* d_x, const float* d_h, bool post, const float* d_post_w, const float* d_w,
                          int64_t n_vec, int64_t n, float eps, float* d_out, const ActRounding& r, Stream s);

// attention() (cuda_api.h) and, where its flash-decoding runs split (its merging blocks write out),
// out's rounding into r; *rounded says whether it was made. r must not overlap ws.
Status attention_round(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                       const AttentionShapeDev& s, float* d_out, Workspace ws, const ActRounding& r, bool* rounded,
                       Stream st);

// gate = silu(gate) * up or gelu_tanh(gate) * up (silu_mul / gelu_tanh_mul) over n elements and,
// where r.q, the result's rounding into r.
Status gated_act_round(bool gelu, float* d_gate, const float* d_up, int64_t n, const ActRounding& r, Stream s);

}  // namespace strata::kernels::cuda
