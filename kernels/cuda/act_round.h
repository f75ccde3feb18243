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

// The FFN's gate and up GEMVs of one column in one kernel (gemv_gated.cu): d_out = act(W_gate x) *
// (W_up x), silu or gelu_tanh, and where next.q, d_out's rounding for the down matrix into next.
// x's rounding must be in ws already (as matmul(..., reuse_act = true) reads it: the norm before
// makes it); next must not overlap it. The bits of matmul(gate), matmul(up), gated_act_round.
// d_counters: kGatedCounterBytes of device memory, zero before the call and zero again after it;
// calls that share them must be on one stream. gated_gemv_applies says where it runs: one column,
// gate and up of one K type (q3_K, q4_K, q5_K) in the GPU layout, same shape, n_out % 32 == 0.
inline constexpr size_t kGatedCounterBytes = 16 * 1024;  // one counter per 32 outputs: n_ff <= 131072
bool gated_gemv_applies(const WeightView& gate, const WeightView& up, int n_cols);
Status gated_gemv(bool gelu, const WeightView& gate, const WeightView& up, int n_cols, float* d_out, Workspace ws,
                  const ActRounding& next, unsigned* d_counters, Stream s);

}  // namespace strata::kernels::cuda
