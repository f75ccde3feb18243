// Host-side pieces shared by the attention files of kernels/cuda (attention.cu: dispatch and the
// tiled SIMT kernel; attention_decode.cu; attention_kv_write.cu): validation of a KV store.
#pragma once

#include <cstdint>

#include "core/ggml_type.h"
#include "core/status.h"
#include "kernels/cuda/cuda_api.h"

namespace strata::kernels::cuda::detail {

inline Status check_kv(const char* op, const KvStoreDev& kv) {
  if (!kv.d_k || !kv.d_v) return Status::error("{}: null KV store pointer", op);
  for (GgmlType t : {kv.k_dtype, kv.v_dtype}) {
    if (t != GgmlType::F16 && t != GgmlType::F32 && t != GgmlType::Q8_0 && t != GgmlType::Q4_1)
      return Status::error("{}: KV dtype {} unsupported (f32, f16, q8_0, q4_1)", op, ggml_type_info(t).name);
  }
  // f32 is one kernel family of its own (units of 4 values); the others mix freely.
  if ((kv.k_dtype == GgmlType::F32) != (kv.v_dtype == GgmlType::F32))
    return Status::error("{}: f32 KV on CUDA needs K and V both f32 (got {} and {})", op,
                         ggml_type_info(kv.k_dtype).name, ggml_type_info(kv.v_dtype).name);
  if (kv.capacity <= 0) return Status::error("{}: KV capacity {} must be > 0", op, kv.capacity);
  if ((reinterpret_cast<uintptr_t>(kv.d_k) | reinterpret_cast<uintptr_t>(kv.d_v)) % 16 != 0) {
    return Status::error("{}: KV store pointers must be 16-byte aligned", op);
  }
  return Status::ok();
}


}  // namespace strata::kernels::cuda::detail
