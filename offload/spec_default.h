// Whether a run that did not choose its speculation (`generate` without --spec) decodes with
// `--spec auto` or plainly: auto where the plan predicts a gain for drafts that cost nothing to
// make (prompt lookup's n-gram continuations) at a cautious acceptance, i.e. wherever a verify pass
// over a few rows costs little more than a plain step. That holds on the GPU (the GEMV reads each
// weight once for all its columns; a streamed step is bound by its copies, which a verify pass
// shares) and not on the CPU engine's exact kernels (a verify pass of n rows costs about n steps).
// auto itself measures the real acceptance and costs and falls back to plain steps where drafts
// lose (spec/speculative_decoder.h), so the prediction only decides whether to start it.
#pragma once

#include <cstdint>
#include <string>

#include "offload/cost_model.h"

namespace strata::offload {

// The acceptance the prediction assumes: auto's own prior for lookup continuations of one-token
// matches, the least trusted drafts it makes (spec/speculative_decoder.h).
inline constexpr double kDefaultSpecAcceptance = 0.3;
// auto is the default only where predicted at least this much faster than plain decoding.
inline constexpr double kDefaultSpecMinGain = 1.05;

struct SpecDefault {
  bool on = false;           // run --spec auto
  double gain = 1.0;         // the best predicted rate over plain decoding at kDefaultSpecAcceptance
  uint32_t k = 0;            // the draft length of that prediction (0: no draft length beats plain)
  double verify2_over_plain = 0;  // a verify pass of 2 rows over a plain step
  std::string reason;        // one line for the report
};

// The decision for the CUDA engine: a placement of blocks m under profile p and run shape r (its
// draft fields are ignored: drafts are free here), trying draft lengths 1..draft_max.
SpecDefault default_speculation(const ModelBlocks& m, const HardwareProfile& p, const Placement& pl, RunShape r,
                                uint32_t draft_max);
// The decision for the CPU engine (--device cpu): its matmuls over every weight block, b rows at a
// time at the profile's CPU rates -- exact f32-activation kernels cost each row again; the int8
// kernels (cpu_int8) read the weights once for several rows where the profile measured them.
SpecDefault default_speculation_cpu(const ModelBlocks& m, const HardwareProfile& p, bool cpu_int8,
                                    uint32_t draft_max);

}  // namespace strata::offload
