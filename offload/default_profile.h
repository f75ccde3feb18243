// The hardware profile used when the user gives none (`strata generate` without --profile): the
// capacities this process can see (the first CUDA device, or none; physical RAM), with rates that
// are stated assumptions, marked `datasheet` with a source saying so, until `strata probe` is run.
// The placement it yields is the one the engine takes today (everything resident in VRAM when it
// fits, or everything on the CPU), so the report's "what went where" is right; its speeds are
// estimates.
#pragma once

#include <vector>

#include "offload/hardware_profile.h"

namespace strata::offload {

// use_gpu: false for --device cpu (a CPU-only profile even where a GPU exists).
// cpu_rates: where a GPU is in use, also measure the CPU (quick_cpu_check): for a run under a VRAM
// budget that may put weight blocks on the cpu tier, where these rates decide between computing a
// block on the CPU and streaming it over PCIe. Without a GPU, or without cpu_rates, they stay
// assumed.
HardwareProfile detected_profile(bool use_gpu, bool cpu_rates);

// The quick CPU check at start-up (run once per process, later calls return the first result): host
// read over a buffer twice the last-level cache (64 MiB to 1 GiB), and the int8-activation GEMV
// (measure_cpu_gemv_q8) of q3_K, q4_K, q5_K, q6_K, q8_0, iq4_xs, iq3_xxs and iq3_s on every hardware
// thread at 1 and 8 columns over a matrix of that size too (one buffer, refilled per type), one
// timed pass after a warm-up: a cpu-tier block's weights come from DRAM every step. Each rate is
// capped at the host read. Marked measured "now" on this machine. The GEMV part takes 0.22 s at
// 64 MiB on a 2-core Zen 4 VM (it was 0.05 s at 16 MiB); at the H100 host's 600 MiB, not yet timed.
struct QuickCpuRates {
  std::vector<RatePoint> host_read;   // one point: all hardware threads
  std::vector<GemvQ8Rate> gemv_q8;
};
const QuickCpuRates& quick_cpu_check();

}  // namespace strata::offload
