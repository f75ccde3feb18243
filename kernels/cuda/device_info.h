// Which CUDA devices this process can use. Compiled as CUDA when the build has the CUDA backend,
// else as a stub that reports none, so callers never need #ifdefs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::kernels::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  uint64_t total_bytes = 0, free_bytes = 0;
  int multiprocessors = 0;
  // DRAM bandwidth from the driver's memory clock and bus width (double data rate): the datasheet
  // figure, e.g. 4915 GB/s for an H200, 360 for an RTX 3060; 0 where the driver does not say.
  double datasheet_gbps = 0;
};

bool compiled_with_cuda();
// Devices visible now. No driver or no device is not an error: the list is empty, and `why_none`
// (if given) says why (e.g. "no CUDA driver", "CUDA built without GPU support").
std::vector<DeviceInfo> devices(std::string* why_none = nullptr);

}  // namespace strata::kernels::cuda
