// The speculation of a run that left --spec unset (`generate`): offload/spec_default.h's decision,
// made on the placement the engine runs -- the executor plan under --vram, else every weight on the
// engine's own device (resident in VRAM, or computed by the CPU engine).
#pragma once

#include "core/status.h"
#include "offload/cost_model.h"
#include "offload/hardware_profile.h"
#include "offload/spec_default.h"
#include "session/session.h"
#include "spec/spec_config.h"

namespace strata::session {

struct DefaultSpec {
  spec::SpecConfig config;           // auto (--draft-max as given) or none
  offload::SpecDefault decision;     // why: decision.reason is the report's line
};

// For the session's engine (open_engine done); p: the profile of a run without --vram (ignored
// under --vram, whose plan has its own); shape: the run's (prompt and generation lengths).
Result<DefaultSpec> default_spec(const Session& s, const offload::HardwareProfile& p, const offload::RunShape& shape);

}  // namespace strata::session
