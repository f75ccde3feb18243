// Kernel launches with programmatic dependent launch (PDL, sm_90) where it is on (set_gemv_pdl,
// gemv_tuning.h): the kernel may be scheduled while the kernel before it on the stream still runs,
// once that kernel has called pdl_launch_dependents (matmul_internal.h). Whatever it launches this
// way must call pdl_wait() in every thread before it reads or writes memory that kernels before it
// use, and before it may return: a kernel's completion then implies its predecessor's, so a later
// kernel that waits for this one also waits for everything before it.
//
// The GEMVs use it (their weight loads start before the norm or quantiser before them ends). The
// small kernels between them (norms, RoPE, the gated activation) can too, with STRATA_SMALL_PDL=1,
// but that measured slower: H100, 27B Q3_K_M resident, 131.5 tok/s with it (those kernels then
// triggered their dependents before waiting) against 134.6 without.
#pragma once

#include <cuda_runtime.h>

namespace strata::kernels::cuda::detail {

bool gpu_gemv_pdl();  // gemv_gpu.cu: PDL on (sm_90 and set_gemv_pdl(true))
// PDL for the kernels between the GEMVs (norms, RoPE, the gated activation): STRATA_SMALL_PDL=1
// and gpu_gemv_pdl().
bool small_kernel_pdl();

// kernel<<<grid, block, smem, s>>>(args...), with PDL where `pdl`. Errors are left for
// cudaGetLastError, as a <<<>>> launch leaves them.
template <class... P, class... A>
void launch_pdl(bool pdl, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A... args) {
  if (!pdl) {
    kernel<<<grid, block, smem, s>>>(args...);
    return;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  (void)cudaLaunchKernelEx(&cfg, kernel, args...);
}

}  // namespace strata::kernels::cuda::detail
