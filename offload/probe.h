// `strata probe`: measures this machine's rates into a HardwareProfile (marked measured, today,
// this host). Host memory read by threads (kernels::cpu::measure_read_bandwidth), CPU GEMV GB/s
// per quant type (the best dot kernel over a weight matrix larger than the caches, all threads),
// the int8-activation GEMV per type, thread count and 1 / 8 columns (measure_cpu_gemv_q8),
// disk reads by queue depth 1..32 (offload/disk_probe.h: io/BlockReader, io_uring + O_DIRECT, on a
// temp file under `dir`). GPU: capacity from kernels::cuda::devices(); H2D/device-read timing needs
// CUDA code that this build does not have yet, so those rates are left to the profile's datasheet
// defaults and say so in their source.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "offload/hardware_profile.h"

namespace strata::offload {

struct ProbeOptions {
  std::string dir = "/var/tmp";  // where the disk test file goes (the NVMe to measure)
  bool quick = false;            // smaller buffers, fewer points (~15 s)
  std::string io_backend = "auto";  // disk reads: auto, io_uring or pread (io/block_reader.h)
  std::function<void(const std::string&)> progress;  // one line per measurement
};

Result<HardwareProfile> probe(const ProbeOptions& opt);

// The int8-activation GEMV (kernels/cpu/gemv_q8.h matmul_q8, activation quantisation included) of
// each type with a kernel, on each thread count (a oneTBB arena of that size) and column count: GB/s
// of weights over a matrix of about `bytes` (4096-wide rows; beyond the caches when bytes is),
// best of `reps` timed passes after one warm-up. probe() stores them as rates.cpu_gemv_q8. The first
// `random_bytes` of each matrix are random weights, copied over the rest (quantising random weights
// to the i-quants' grids takes ~10 ms per MiB; the copies read alike).
std::vector<GemvQ8Rate> measure_cpu_gemv_q8(const std::vector<GgmlType>& types, const std::vector<int>& threads,
                                            const std::vector<int>& cols, uint64_t bytes, int reps,
                                            const Provenance& prov,
                                            const std::function<void(const std::string&)>& progress = {},
                                            uint64_t random_bytes = uint64_t(32) << 20);

}  // namespace strata::offload
