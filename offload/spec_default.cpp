#include "offload/spec_default.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace strata::offload {

namespace {

// The decision from the time of a pass over b rows (pass_s(1) a plain step).
template <class PassSeconds>
SpecDefault decide(PassSeconds&& pass_s, uint32_t draft_max) {
  SpecDefault d;
  const double plain = pass_s(1);
  if (!(plain > 0)) {
    d.reason = "none (the default: no decode step to predict)";
    return d;
  }
  d.verify2_over_plain = pass_s(2) / plain;
  const double a = kDefaultSpecAcceptance;
  for (uint32_t k = 1; k <= std::max(1u, draft_max); ++k) {
    const double tokens = (1.0 - std::pow(a, double(k + 1))) / (1.0 - a);  // 1 + a + ... + a^k
    const double gain = tokens * plain / pass_s(k + 1);
    if (gain > d.gain) d.gain = gain, d.k = k;
  }
  d.on = d.gain >= kDefaultSpecMinGain;
  // One draft pays where its acceptance exceeds the second row's cost: 1 + a > verify(2) / plain.
  const double break_even = d.verify2_over_plain - 1.0;
  if (d.on)
    d.reason = fmt::format("auto (the default: a verify pass of 2 rows is predicted at {:.2f} plain steps, so a free "
                           "draft pays above acceptance {:.2f}; at {:.1f}, x{:.2f} with {} drafts; --spec none turns "
                           "it off)",
                           d.verify2_over_plain, break_even, a, d.gain, d.k);
  else
    d.reason = fmt::format("none (the default: a verify pass of 2 rows is predicted at {:.2f} plain steps, so a free "
                           "draft pays only above acceptance {:.2f}; at {:.1f} the best is x{:.2f}, under x{:.2f}; "
                           "--spec auto turns it on)",
                           d.verify2_over_plain, break_even, a, d.gain, kDefaultSpecMinGain);
  return d;
}

}  // namespace

SpecDefault default_speculation(const ModelBlocks& m, const HardwareProfile& p, const Placement& pl, RunShape r,
                                uint32_t draft_max) {
  r.draft_depth = 0;  // a plain sweep: the drafts cost nothing, verification runs every layer
  const uint64_t pos = r.decode_pos();
  return decide([&](uint32_t rows) { return sweep_cost(m, p, pl, r, 0, m.n_layer, true, rows, pos, false).total_s(); },
                draft_max);
}

SpecDefault default_speculation_cpu(const ModelBlocks& m, const HardwareProfile& p, bool cpu_int8,
                                    uint32_t draft_max) {
  auto block_s = [&](const WeightBlock& b, uint32_t rows) {
    const double q8 = cpu_int8 ? p.cpu_gemv_q8_gbps(b.main_type(), rows) : 0.0;
    if (q8 > 0) return double(b.bytes) / (q8 * 1e9);
    const double f32 = p.cpu_gemv_gbps(b.main_type());
    return f32 > 0 ? rows * double(b.bytes) / (f32 * 1e9) : 0.0;
  };
  return decide(
      [&](uint32_t rows) {
        double s = block_s(m.head, rows);
        for (uint32_t il = 0; il < m.n_layer; ++il) s += block_s(m.attention[il], rows) + block_s(m.ffn[il], rows);
        return s;
      },
      draft_max);
}

}  // namespace strata::offload
