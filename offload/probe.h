// `strata probe`: measures this machine's rates into a HardwareProfile (marked measured, today,
// this host). Host memory read by threads (kernels::cpu::measure_read_bandwidth), CPU GEMV GB/s
// per quant type (the best dot kernel over a weight matrix larger than the caches, all threads),
// disk reads by queue depth 1..32 (offload/disk_probe.h: io/BlockReader, io_uring + O_DIRECT, on a
// temp file under `dir`). GPU: capacity from kernels::cuda::devices(); H2D/device-read timing needs
// CUDA code that this build does not have yet, so those rates are left to the profile's datasheet
// defaults and say so in their source.
#pragma once

#include <functional>
#include <string>

#include "offload/hardware_profile.h"

namespace strata::offload {

struct ProbeOptions {
  std::string dir = "/var/tmp";  // where the disk test file goes (the NVMe to measure)
  bool quick = false;            // smaller buffers, fewer points (~15 s)
  std::string io_backend = "auto";  // disk reads: auto, io_uring or pread (io/block_reader.h)
  std::function<void(const std::string&)> progress;  // one line per measurement
};

Result<HardwareProfile> probe(const ProbeOptions& opt);

}  // namespace strata::offload
