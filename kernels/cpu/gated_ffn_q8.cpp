#include "kernels/cpu/gated_ffn_q8.h"

#include "core/status.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/team_parts.h"

namespace strata::kernels::cpu {

static_assert(kQ8Group % kQ8MaxRows == 0, "a part's first row must start a kernel row group");

Q8ActView gated_ffn_q8(const WeightView& gate, const WeightView& up, GatedActFn act, const float* x, int64_t n_tok,
                       float* gate_y, float* up_y, void* q8_out) {
  const int64_t n_ff = gate.n_out;
  STRATA_CHECK(up.n_out == n_ff && up.n_in == gate.n_in && n_ff % kQ8Group == 0,
               "gated_ffn_q8: gate {}x{}, up {}x{}", gate.n_out, gate.n_in, up.n_out, up.n_in);
  const Q8ActView in = quantize_q8_input(x, gate.n_in, n_tok);
  const DotQ8RowsFn gate_kernel = q8_kernel_for(gate, in), up_kernel = q8_kernel_for(up, in);
  const Q8ActView out = q8_act_layout(n_ff, n_tok, q8_out);
  // Parts by bytes read (as matmul_q8_group would cut both matrices), in whole groups.
  const int64_t groups = n_ff / kQ8Group;
  const uint64_t bytes = uint64_t(n_ff) * (gate.row_bytes + up.row_bytes) * uint64_t(n_tok);
  const int n_parts = part_count(bytes, groups);
  const team_profile::Label label("gated_ffn_q8");
  team_run(n_parts, [&](int p) {
    const int64_t r0 = groups * p / n_parts * kQ8Group, r1 = groups * (p + 1) / n_parts * kQ8Group;
    matmul_q8_rows(gate, in, gate_y, gate_kernel, r0, r1);
    matmul_q8_rows(up, in, up_y, up_kernel, r0, r1);
    for (int64_t c = 0; c < n_tok; ++c) {
      act(gate_y + c * n_ff, up_y + c * n_ff, r0, r1);
      quantize_q8_act_range(gate_y, out, int(c), r0, r1);
    }
  });
  return out;
}

}  // namespace strata::kernels::cpu
