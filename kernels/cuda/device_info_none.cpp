#include "kernels/cuda/device_info.h"

namespace strata::kernels::cuda {

bool compiled_with_cuda() { return false; }

std::vector<DeviceInfo> devices(std::string* why_none) {
  if (why_none) *why_none = "strata was built without CUDA (-DSTRATA_CUDA=OFF or no nvcc)";
  return {};
}

}  // namespace strata::kernels::cuda
