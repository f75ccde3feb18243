#include "kernels/cuda/device_info.h"

#include <cuda_runtime.h>

namespace strata::kernels::cuda {

bool compiled_with_cuda() { return true; }

std::vector<DeviceInfo> devices(std::string* why_none) {
  std::vector<DeviceInfo> out;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why_none) *why_none = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.index = i;
    d.name = prop.name;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.total_bytes = prop.totalGlobalMem;
    d.multiprocessors = prop.multiProcessorCount;
    int clock_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, i) == cudaSuccess)
      d.datasheet_gbps = 2.0 * double(clock_khz) * 1e3 * double(bus_bits) / 8.0 / 1e9;
    cudaGetLastError();  // an attribute this driver lacks leaves no sticky error behind
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) d.free_bytes = free_b;
    out.push_back(d);
  }
  if (out.empty() && why_none) *why_none = "no CUDA device";
  return out;
}

}  // namespace strata::kernels::cuda
