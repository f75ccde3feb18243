// Checking CUDA calls (every .cu file of the backend): one place turns a cudaError_t into a Status
// naming the operation, and one place lets a test inject a device failure (cuda_api.h inject_error).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace strata::kernels::cuda::detail {

// True when the armed fault (cuda_api.h inject_error) fires at this checked call.
bool injected_error_fires();

// "op: cuda error string" for a failed CUDA call; ok for cudaSuccess. Every checked call goes
// through here, which is where an injected fault replaces a success.
inline Status cuda_status(cudaError_t err, const std::string& op) {
  if (err == cudaSuccess) {
    if (!injected_error_fires()) return Status::ok();
    return Status::error("{}: device error (injected by STRATA_INJECT_CUDA_ERROR / inject_error)", op);
  }
  return Status::error("{}: {}", op, cudaGetErrorString(err));
}

// The status of the kernel launch just made: "op: kernel launch failed: ..." on error.
inline Status launch_status(const std::string& op) { return cuda_status(cudaGetLastError(), op + ": kernel launch"); }

}  // namespace strata::kernels::cuda::detail
