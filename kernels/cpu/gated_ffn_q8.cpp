#include "kernels/cpu/gated_ffn_q8.h"

#include "core/status.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/q8_jobs.h"
#include "kernels/cpu/team_parts.h"

namespace strata::kernels::cpu {

static_assert(kQ8Group % kQ8MaxRows == 0, "a part's first row must start a kernel row group");

GatedFfnQ8Job::GatedFfnQ8Job(const WeightView& g, const WeightView& u, GatedActFn fn, const Q8ActView& x,
                             int64_t tokens, float* gy, float* uy, void* q8_out)
    : gate(&g), up(&u), act(fn), in(x), gate_y(gy), up_y(uy), n_tok(tokens) {
  const int64_t n_ff = g.n_out;
  STRATA_CHECK(u.n_out == n_ff && u.n_in == g.n_in && n_ff % kQ8Group == 0,
               "gated_ffn_q8: gate {}x{}, up {}x{}", g.n_out, g.n_in, u.n_out, u.n_in);
  gate_kernel = q8_kernel_for(g, in), up_kernel = q8_kernel_for(u, in);
  out = q8_act_layout(n_ff, n_tok, q8_out);
  // Parts by bytes read (as matmul_q8_group would cut both matrices), in whole groups.
  groups = n_ff / kQ8Group;
  const uint64_t bytes = uint64_t(n_ff) * (g.row_bytes + u.row_bytes) * uint64_t(n_tok);
  parts = part_count(bytes, groups);
}

void GatedFfnQ8Job::part(int p) const {
  const int64_t n_ff = gate->n_out;
  const int64_t r0 = groups * p / parts * kQ8Group, r1 = groups * (p + 1) / parts * kQ8Group;
  matmul_q8_rows(*gate, in, gate_y, gate_kernel, r0, r1);
  matmul_q8_rows(*up, in, up_y, up_kernel, r0, r1);
  for (int64_t c = 0; c < n_tok; ++c) {
    act(gate_y + c * n_ff, up_y + c * n_ff, r0, r1);
    quantize_q8_act_range(gate_y, out, int(c), r0, r1);
  }
}

Q8ActView gated_ffn_q8(const WeightView& gate, const WeightView& up, GatedActFn act, const float* x, int64_t n_tok,
                       float* gate_y, float* up_y, void* q8_out) {
  const GatedFfnQ8Job job(gate, up, act, quantize_q8_input(x, gate.n_in, n_tok), n_tok, gate_y, up_y, q8_out);
  const team_profile::Label label("gated_ffn_q8");
  team_run(job.n_parts(), [&](int p) { job.part(p); });
  return job.out;
}

}  // namespace strata::kernels::cpu
