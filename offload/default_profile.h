// The hardware profile used when the user gives none (`strata generate` without --profile): the
// capacities this process can see (the first CUDA device, or none; physical RAM), with rates that
// are stated assumptions, marked `datasheet` with a source saying so, until `strata probe` is run.
// The placement it yields is the one the engine takes today (everything resident in VRAM when it
// fits, or everything on the CPU), so the report's "what went where" is right; its speeds are
// estimates.
#pragma once

#include "offload/hardware_profile.h"

namespace strata::offload {

// use_gpu: false for --device cpu (a CPU-only profile even where a GPU exists).
HardwareProfile detected_profile(bool use_gpu);

}  // namespace strata::offload
