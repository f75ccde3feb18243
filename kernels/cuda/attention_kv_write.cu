// kv_write (cuda_api.h): K and V rows into their slots (position p in slot p % capacity), converted
// to each store's dtype: f32, f16 (round to nearest even, as core/half.h), or Q8_0 / Q4_1 blocks
// bit for bit as the host quantiser (kv/kv_quant.h; kv_quant.cuh says how).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/attention_internal.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/kv_quant.cuh"

namespace strata::kernels::cuda {
namespace {

using detail::check_kv;
using detail::launch_status;

cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

// f32 / f16 K and V of the same type in one kernel (the common case: one launch per layer).
template <typename T>
__global__ void kv_write_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                const int32_t* __restrict__ pos, int64_t n_tok, int64_t width, int64_t capacity,
                                T* dk, T* dv) {
  const int64_t total = n_tok * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / width, c = i % width;
    const int64_t dst = (int64_t(pos[t]) % capacity) * width + c;
    if constexpr (sizeof(T) == 2) {
      dk[dst] = __float2half_rn(k[i]);  // round to nearest even, as core/half.h's f32_to_f16
      dv[dst] = __float2half_rn(v[i]);
    } else {
      dk[dst] = k[i];
      dv[dst] = v[i];
    }
  }
}

// One tensor (K or V) into an f32 / f16 store.
template <typename T>
__global__ void kv_store_float(const float* __restrict__ x, const int32_t* __restrict__ pos, int64_t n_tok,
                               int64_t width, int64_t capacity, T* dst) {
  const int64_t total = n_tok * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / width, c = i % width;
    const int64_t o = (int64_t(pos[t]) % capacity) * width + c;
    if constexpr (sizeof(T) == 2) dst[o] = __float2half_rn(x[i]);
    else dst[o] = x[i];
  }
}

// One tensor into a Q8_0 / Q4_1 store: one warp per group of 32 values (lane = value), so the
// group's range is two shuffle reductions and every lane writes its own code.
template <int F>
__global__ void kv_store_quant(const float* __restrict__ x, const int32_t* __restrict__ pos, int64_t n_tok,
                               int64_t width, int64_t capacity, uint8_t* dst) {
  constexpr int64_t kBytes = F == kvq::kQ8 ? kvq::kQ8Bytes : kvq::kQ4Bytes;
  const int lane = int(threadIdx.x & 31u);
  const int64_t groups = width / kvq::kGroup;  // per row
  const int64_t total = n_tok * groups;
  const int64_t n_warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  // gi is uniform across the warp, so the whole warp takes every iteration (shuffles need it).
  for (int64_t gi = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; gi < total; gi += n_warps) {
    const int64_t t = gi / groups, b = gi % groups;
    const float v = x[t * width + b * kvq::kGroup + lane];
    uint8_t* blk = dst + (int64_t(pos[t]) % capacity) * (groups * kBytes) + b * kBytes;
    if constexpr (F == kvq::kQ8) kvq::quantize_q8_group(v, lane, blk);
    else kvq::quantize_q4_group(v, lane, blk);
  }
}

}  // namespace

Status kv_write(const float* d_k, const float* d_v, const int32_t* d_pos, int64_t n_tok, int64_t width,
                const KvStoreDev& kv, Stream s) {
  if (!d_k || !d_v || !d_pos) return Status::error("kv_write: null pointer");
  if (Status st = check_kv("kv_write", kv); !st) return st;
  if (n_tok < 0 || width <= 0) return Status::error("kv_write: bad shape (n_tok {}, width {})", n_tok, width);
  if (n_tok == 0) return Status::ok();
  const int64_t total = n_tok * width;
  const unsigned grid = unsigned(std::min<int64_t>((total + 255) / 256, 65535 * 16));
  const cudaStream_t st = as_stream(s);
  if (kv.k_dtype == kv.v_dtype && kv.k_dtype == GgmlType::F16) {
    kv_write_kernel<__half><<<grid, 256, 0, st>>>(d_k, d_v, d_pos, n_tok, width, kv.capacity,
                                                  static_cast<__half*>(kv.d_k), static_cast<__half*>(kv.d_v));
    return launch_status("kv_write");
  }
  if (kv.k_dtype == kv.v_dtype && kv.k_dtype == GgmlType::F32) {
    kv_write_kernel<float><<<grid, 256, 0, st>>>(d_k, d_v, d_pos, n_tok, width, kv.capacity,
                                                 static_cast<float*>(kv.d_k), static_cast<float*>(kv.d_v));
    return launch_status("kv_write");
  }
  // Mixed or quantised: one launch per tensor.
  for (int which = 0; which < 2; ++which) {
    const float* x = which ? d_v : d_k;
    void* dst = which ? kv.d_v : kv.d_k;
    switch (which ? kv.v_dtype : kv.k_dtype) {
      case GgmlType::F16:
        kv_store_float<__half><<<grid, 256, 0, st>>>(x, d_pos, n_tok, width, kv.capacity, static_cast<__half*>(dst));
        break;
      case GgmlType::F32:
        kv_store_float<float><<<grid, 256, 0, st>>>(x, d_pos, n_tok, width, kv.capacity, static_cast<float*>(dst));
        break;
      case GgmlType::Q8_0:
      case GgmlType::Q4_1: {
        if (width % kvq::kGroup != 0)
          return Status::error("kv_write: quantised KV needs whole groups of 32 (width {})", width);
        const int64_t warps = n_tok * (width / kvq::kGroup);  // 8 per block of 256 threads
        const unsigned qgrid = unsigned(std::min<int64_t>((warps + 7) / 8, 65535 * 16));
        if ((which ? kv.v_dtype : kv.k_dtype) == GgmlType::Q8_0)
          kv_store_quant<kvq::kQ8><<<qgrid, 256, 0, st>>>(x, d_pos, n_tok, width, kv.capacity, static_cast<uint8_t*>(dst));
        else
          kv_store_quant<kvq::kQ4><<<qgrid, 256, 0, st>>>(x, d_pos, n_tok, width, kv.capacity, static_cast<uint8_t*>(dst));
        break;
      }
      default: return Status::error("kv_write: unsupported KV dtype");
    }
    if (Status e = launch_status("kv_write"); !e) return e;
  }
  return Status::ok();
}

}  // namespace strata::kernels::cuda
