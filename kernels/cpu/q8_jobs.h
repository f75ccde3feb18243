// The int8-activation products of gemv_q8.h and gated_ffn_q8.h as the parts of a team job that the
// caller hands to a job of phases (ThreadTeam::run_phases), so that a chain of them (an FFN block:
// gate/up, then down) runs as one job with its serial steps inside it. matmul_q8_group and
// gated_ffn_q8 run exactly these parts, so a row computed either way has the same bits.
//
// A job holds pointers to its views and outputs (not their data): the activations it reads may be
// written after it is built, by a serial step before its phase. Copyable; part(p) is const and safe
// to call concurrently for distinct p.
#pragma once

#include <cstdint>

#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/q8_act.h"
#include "kernels/cpu/team_parts.h"
#include "kernels/weight_view.h"

namespace strata::kernels::cpu {

// The layout of the calling thread's scratch for quantize_q8_input(x, n_in, n_tok), unfilled:
// quantize_q8_act(x, n_in, n_tok, view's buffer) then gives the same bytes quantize_q8_input would.
Q8ActView q8_input_layout(int64_t n_in, int64_t n_tok);

// y[j] = W[j] x for `count` matrices (1..kMaxQ8Group) of equal n_in: their rows concatenated and
// cut by bytes into whole kQ8MaxRows groups (RowParts).
struct Q8RowsJob {
  const WeightView* w[kMaxQ8Group] = {};
  float* y[kMaxQ8Group] = {};
  DotQ8RowsFn kernel[kMaxQ8Group] = {};
  uint64_t offset[kMaxQ8Group + 1] = {};
  int count = 0;
  Q8ActView x;
  RowParts parts;

  Q8RowsJob(const WeightView* const* w, float* const* y, int count, const Q8ActView& x);
  int n_parts() const { return parts.n_parts; }
  void part(int p) const;
  // Asks for the rows of parts [p0, p1) in the L2 cache (prefetch hints: nothing computed, nothing
  // waited for), so that a thread idle before this job's phase can start its reads early.
  void prefetch(int p0, int p1) const;
};

// gated_ffn_q8's parts: rows [r0, r1) of gate and up in whole kQ8Group groups, act, and the
// activation's int8 codes for the down projection (`out`).
struct GatedFfnQ8Job {
  const WeightView* gate = nullptr;
  const WeightView* up = nullptr;
  GatedActFn act = nullptr;
  Q8ActView in;
  DotQ8RowsFn gate_kernel = nullptr, up_kernel = nullptr;
  float* gate_y = nullptr;
  float* up_y = nullptr;
  Q8ActView out;
  int64_t n_tok = 0, groups = 0;
  int parts = 1;

  GatedFfnQ8Job(const WeightView& gate, const WeightView& up, GatedActFn act, const Q8ActView& in, int64_t n_tok,
                float* gate_y, float* up_y, void* q8_out);
  int n_parts() const { return parts; }
  void part(int p) const;
};

}  // namespace strata::kernels::cpu
