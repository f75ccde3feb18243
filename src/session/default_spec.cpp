#include "session/default_spec.h"

#include "offload/model_blocks.h"

namespace strata::session {

Result<DefaultSpec> default_spec(const Session& s, const offload::HardwareProfile& p, const offload::RunShape& shape) {
  const uint32_t n_layer = s.model().spec.hp.n_layer;
  DefaultSpec out;
  if (const auto& e = s.executor_plan()) {
    out.decision = offload::default_speculation(e->blocks, e->profile, e->plan.placement, e->shape, s.options().draft_max);
  } else {
    auto blocks = offload::model_blocks(s.model().file, s.model().spec);
    if (!blocks) return blocks.status();
    if (s.options().uses_gpu()) {
      // Every block resident in VRAM.
      const auto pl = offload::Placement::uniform(n_layer, offload::Tier::gpu, offload::KvTier::gpu);
      out.decision = offload::default_speculation(*blocks, p, pl, shape, s.options().draft_max);
    } else {
      auto int8 = s.options().cpu_int8();
      if (!int8) return int8.status();
      out.decision = offload::default_speculation_cpu(*blocks, p, *int8, s.options().draft_max);
    }
  }
  auto c = spec::parse_spec(out.decision.on ? "auto" : "none", s.options().draft_max, n_layer);
  if (!c) return c.status();
  out.config = *c;
  out.config.window = s.spec().window;  // --draft-window as given
  return out;
}

}  // namespace strata::session
