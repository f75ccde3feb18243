// An FFN's gate and up products on int8 activations, its gated activation, and the int8
// quantisation of the activation's result for the down projection, in one thread-team job
// (decode-sized calls).
//
// Why: apart these were a matmul_q8_group job, an activation job (ops.h) and a quantisation of the
// down input on the calling thread between them: two team hand-offs (wake, claim, join) and a
// serial pass per layer, where a small model's decode step is mostly hand-offs.
//
// Each part owns the same rows [r0, r1) of gate and up, in whole 32-element activation groups
// (kQ8Group; a multiple of kQ8MaxRows, so the kernel's row groups start where one thread's loop
// starts them), computes them as matmul_q8 does, applies `act` to those elements and quantises them
// (quantize_q8_act_range). So every output is bit for bit what matmul_q8_group, act over the whole
// vector, then quantize_q8_act give.
//   gate, up: n_ff rows of n_in (types with has_dot_q8); x: (n_tok, n_in) f32
//   gate_y, up_y: (n_tok, n_ff) out; gate_y holds act(gate) * up (the down projection's f32 input)
//   q8_out: q8_act_bytes(n_ff, n_tok) bytes, 64-byte aligned: gate_y quantised, the returned view
// n_ff % kQ8Group == 0 (asserted). Thread-safety as matmul_q8 (gemv_q8.h).
#pragma once

#include <cstdint>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/q8_act.h"
#include "kernels/weight_view.h"

namespace strata::kernels::cpu {

Q8ActView gated_ffn_q8(const WeightView& gate, const WeightView& up, GatedActFn act, const float* x, int64_t n_tok,
                       float* gate_y, float* up_y, void* q8_out);

}  // namespace strata::kernels::cpu
