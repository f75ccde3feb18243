// Matmul on quantised weights (cuda_api.h): validation at the boundary, GEMV dispatch to the
// per-family files, and the GEMM path (dequantised f16 tiles + cuBLAS).
//
// GEMM precision: W tiles are decoded exactly and rounded to f16, x is rounded to f16, products are
// accumulated in f32 on tensor cores (CUBLAS_COMPUTE_32F). Each product w * x thus carries a relative
// error <= ~2^-10 (two f16 roundings), so |y - y_exact| <= 2^-10 sum|w x| + f32 accumulation error
// (the bound the tests use). f16 overflows above 65504: activations that large would become inf;
// normalised LLM activations times their norm weights stay far below (revisit for a model that
// does not: bf16 or a per-column scale).
//
// cuBLAS: one handle per (thread, device), created lazily on first use and bound to the caller's
// stream on every call, so concurrent callers on different threads never share a handle; a thread
// must not call gemm for two streams concurrently (it does not: calls are synchronous on the host).
// Handles live until process exit (not destroyed at thread exit, where the CUDA context may
// already be torn down).
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/act_round.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/matmul_internal.h"
#include "kernels/gpu_layout.h"

namespace strata::kernels::cuda {
namespace {

using detail::cuda_status;
using detail::launch_status;

// Byte alignment of W's data pointer and row stride that the decoders' loads need
// (quant_decode.cuh kAlign); float types fall back to element loads when not 16-aligned.
int required_align(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K: return 4;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: return 8;
    case GgmlType::IQ4_XS: return 8;
    case GgmlType::F32: return 4;
    default: return 2;
  }
}

bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

std::string op_name(const char* op, const WeightView& w) {
  return fmt::format("{} {} {}x{}", op, ggml_type_info(w.type).name, w.n_in, w.n_out);
}

bool is_gpu_layout(const WeightView& w) { return w.layout == WeightLayout::kGpu; }

Status validate_weights(const WeightView& w, const std::string& op) {
  const auto info = ggml_type_info(uint32_t(w.type));
  if (!info || !supports_weight_type(w.type)) return Status::error("{}: unsupported weight type {}", op, uint32_t(w.type));
  if (!w.data) return Status::error("{}: null weight pointer", op);
  if (w.n_in <= 0 || w.n_out <= 0) return Status::error("{}: empty shape", op);
  if (is_gpu_layout(w)) {
    if (gpu_layout_bytes(w.type, w.n_in, w.n_out) == 0)
      return Status::error("{}: no GPU layout for this type and row length", op);
    if (reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return Status::error("{}: gpu-layout weights must be 16-byte aligned", op);
    if (w.n_out > (int64_t(1) << 31) - 8) return Status::error("{}: too many rows", op);
    return Status::ok();
  }
  if (w.layout != WeightLayout::kGguf) return Status::error("{}: unknown weight layout {}", op, int(w.layout));
  if (w.n_in % info->block_size != 0) {
    return Status::error("{}: row length {} is not a multiple of the block size {}", op, w.n_in, info->block_size);
  }
  if (w.row_bytes < ggml_row_bytes(w.type, uint64_t(w.n_in))) return Status::error("{}: row_bytes {} too small", op, w.row_bytes);
  const int a = required_align(w.type);
  if (reinterpret_cast<uintptr_t>(w.data) % a != 0 || w.row_bytes % a != 0) {
    return Status::error("{}: weight data and row stride must be {}-byte aligned", op, a);
  }
  if (w.n_out > (int64_t(1) << 31) - 1) return Status::error("{}: too many rows", op);
  return Status::ok();
}

// validate_weights without building a message: ok exactly when validate_weights is (the caller
// then calls validate_weights for the message).
Status validate_weights_fast(const WeightView& w) {
  static const std::string kNone;
  const auto info = ggml_type_info(uint32_t(w.type));
  if (!info || !info->has_cpu_kernels || !w.data || w.n_in <= 0 || w.n_out <= 0) return Status::error("invalid");
  if (is_gpu_layout(w)) {
    if (gpu_layout_bytes(w.type, w.n_in, w.n_out) == 0 || reinterpret_cast<uintptr_t>(w.data) % 16 != 0 ||
        w.n_out > (int64_t(1) << 31) - 8)
      return Status::error("invalid");
    return Status::ok();
  }
  return validate_weights(w, kNone);  // the GGUF layout: the full check (its message is rebuilt on error)
}

// launch_status with the name built only on failure (same injected-fault accounting: one check).
template <class Name>
Status launch_status_lazy(Name&& name) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) {
    if (!detail::injected_error_fires()) return Status::ok();
    return Status::error("{}: kernel launch: device error (injected by STRATA_INJECT_CUDA_ERROR / inject_error)", name());
  }
  return Status::error("{}: kernel launch: {}", name(), cudaGetErrorString(err));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Float types use 8-element vector loads when everything is 16-byte aligned.
bool float_piece8(const WeightView& w, const float* d_x) {
  return w.n_in % 8 == 0 && aligned16(w.data) && w.row_bytes % 16 == 0 && (d_x == nullptr || aligned16(d_x));
}


constexpr size_t kWsAlign = 256;
size_t align_up(size_t n) { return (n + kWsAlign - 1) / kWsAlign * kWsAlign; }

// Rows per dequantised f16 tile: about kGemmTileBytes of scratch, a multiple of 64 rows.
int64_t gemm_tile_rows(const WeightView& w) {
  const int64_t fit = int64_t(kGemmTileBytes / (size_t(w.n_in) * 2));
  const int64_t rows = std::max<int64_t>(64, fit / 64 * 64);
  return std::min(rows, w.n_out);
}

struct CublasSlot {
  int device = -1;
  cublasHandle_t handle = nullptr;
};

Result<cublasHandle_t> cublas_handle(const std::string& op) {
  thread_local CublasSlot slots[16];  // indexed by device ordinal
  int dev = 0;
  STRATA_TRY(cuda_status(cudaGetDevice(&dev), op));
  if (dev < 0 || dev >= 16) return Status::error("{}: device ordinal {} out of range", op, dev);
  CublasSlot& slot = slots[dev];
  if (!slot.handle) {
    const cublasStatus_t st = cublasCreate(&slot.handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
      slot.handle = nullptr;
      return Status::error("{}: cublasCreate: {}", op, cublasGetStatusString(st));
    }
    slot.device = dev;
  }
  return slot.handle;
}

}  // namespace

Status set_matmul_workspace(void* d_ptr, size_t bytes) {
  auto handle = cublas_handle("set_matmul_workspace");
  if (!handle) return handle.status();
  const cublasStatus_t st = cublasSetWorkspace(*handle, d_ptr, bytes);
  if (st != CUBLAS_STATUS_SUCCESS) return Status::error("set_matmul_workspace: {}", cublasGetStatusString(st));
  return Status::ok();
}

namespace {

__global__ void f32_to_f16_kernel(const float* __restrict__ x, __half* __restrict__ out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(x[i]);
}

}  // namespace

bool supports_weight_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: case GgmlType::IQ3_XXS: case GgmlType::IQ3_S: case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ1_S: case GgmlType::IQ1_M:
      return true;
    default: return false;
  }
}

Status gemv(const WeightView& w, const float* d_x, int n_cols, float* d_y, Stream s) {
  const std::string op = op_name("gemv", w);
  STRATA_TRY(validate_weights(w, op));
  if (n_cols < 1 || n_cols > kMaxGemvCols) return Status::error("{}: n_cols {} outside 1..{}", op, n_cols, kMaxGemvCols);
  if (!d_x || !d_y) return Status::error("{}: null activation or output pointer", op);
  if (is_gpu_layout(w)) return Status::error("{}: gpu-layout weights need a gemv workspace (int8 activations)", op);
  const cudaStream_t st = cudaStream_t(s);
  bool launched = false;
  if (is_float_type(w.type)) {
    launched = detail::launch_gemv_float(w, float_piece8(w, d_x), d_x, n_cols, d_y, st);
  } else {
    if (!aligned16(d_x)) return Status::error("{}: activations must be 16-byte aligned", op);
    launched = detail::launch_gemv_legacy(w, d_x, n_cols, d_y, st) || detail::launch_gemv_k(w, d_x, n_cols, d_y, st) ||
               detail::launch_gemv_iq(w, d_x, n_cols, d_y, st);
  }
  if (!launched) return Status::error("{}: no CUDA kernel for this type", op);
  return launch_status(op);
}

// Workspace of the GEMM path: the f16 copy of x first (its offset the same for every matrix, so
// that matrices reading the same x can share it: gemm's reuse_x16), then the dequantised tile.
size_t workspace_bytes_for_gemm(const WeightView& w, int n_cols) {
  if (w.n_in <= 0 || w.n_out <= 0 || n_cols <= 0) return 0;
  return align_up(size_t(n_cols) * size_t(w.n_in) * 2) + align_up(size_t(gemm_tile_rows(w)) * size_t(w.n_in) * 2);
}

Status gemm(const WeightView& w, const float* d_x, int n_cols, float* d_y, Workspace ws, Stream s, bool reuse_x16) {
  const std::string op = fmt::format("{} n_cols {}", op_name("gemm", w), n_cols);
  STRATA_TRY(validate_weights(w, op));
  if (n_cols < 1) return Status::error("{}: n_cols must be >= 1", op);
  if (!d_x || !d_y) return Status::error("{}: null activation or output pointer", op);
  if (w.n_in > INT32_MAX) return Status::error("{}: row too long for cuBLAS", op);
  const size_t need = workspace_bytes_for_gemm(w, n_cols);
  if (!ws.d_ptr || ws.bytes < need) return Status::error("{}: workspace {} bytes < {} needed", op, ws.bytes, need);
  const cudaStream_t st = cudaStream_t(s);
  auto handle = cublas_handle(op);
  if (!handle) return handle.status();
  cublasStatus_t cst = cublasSetStream(*handle, st);
  if (cst != CUBLAS_STATUS_SUCCESS) return Status::error("{}: cublasSetStream: {}", op, cublasGetStatusString(cst));

  const int64_t tile_rows = gemm_tile_rows(w);
  const int64_t nx = int64_t(n_cols) * w.n_in;
  __half* d_xh = static_cast<__half*>(ws.d_ptr);
  __half* d_tile = reinterpret_cast<__half*>(static_cast<char*>(ws.d_ptr) + align_up(size_t(nx) * 2));
  if (!reuse_x16) {
    f32_to_f16_kernel<<<unsigned((nx + 255) / 256), 256, 0, st>>>(d_x, d_xh, nx);
    STRATA_TRY(launch_status(op + ": convert x to f16"));
  }
  const bool piece8 = is_float_type(w.type) && float_piece8(w, nullptr);
  const float alpha = 1.0f, beta = 0.0f;
  for (int64_t row0 = 0; row0 < w.n_out; row0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, w.n_out - row0);
    const bool ok = is_gpu_layout(w) ? detail::launch_dequant_gpu_f16(w, row0, rows, d_tile, st)
                                     : detail::launch_dequant_f16(w, piece8, row0, rows, d_tile, st);
    if (!ok) return Status::error("{}: no CUDA kernel", op);
    STRATA_TRY(launch_status(op + ": dequantise tile"));
    // Column-major view: tile = (n_in, rows), x = (n_in, n_cols), y = (n_out, n_cols) from row0.
    cst = cublasGemmEx(*handle, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), n_cols, int(w.n_in), &alpha, d_tile, CUDA_R_16F,
                       int(w.n_in), d_xh, CUDA_R_16F, int(w.n_in), &beta, d_y + row0, CUDA_R_32F, int(w.n_out),
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (cst != CUBLAS_STATUS_SUCCESS) return Status::error("{}: cublasGemmEx: {}", op, cublasGetStatusString(cst));
  }
  return launch_status(op);
}

namespace {

// Alignment the int8-activation decoders' wide loads need (quant_unit.cuh kAlign); 0 = no such path.
int q8_align(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: return 16;
    case GgmlType::IQ4_XS: return 8;
    case GgmlType::Q2_K:
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: return 4;
    case GgmlType::Q3_K:
    case GgmlType::Q6_K:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL: case GgmlType::IQ3_XXS: case GgmlType::IQ3_S: case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S: case GgmlType::IQ1_S: case GgmlType::IQ1_M: return 2;
    default: return 0;
  }
}

}  // namespace

size_t workspace_bytes_for_gemv(const WeightView& w, int n_cols) {
  if (w.n_in <= 0 || n_cols <= 0 || q8_align(w.type) == 0) return 0;
  const size_t n = size_t(n_cols) * size_t(w.n_in);
  return align_up(n) + align_up(n / 32 * 4) + align_up(n / 16 * 4);
}

// The int8-activation path's conditions (gemv below); 0 when the float kernel would run.
int gemv_act_key(const WeightView& w, int n_cols, Workspace ws) {
  if (n_cols < 1 || n_cols > max_gemv_cols(w)) return 0;
  const size_t need = workspace_bytes_for_gemv(w, n_cols);
  const bool gpu = is_gpu_layout(w);
  const bool aligned = gpu || (q8_align(w.type) > 0 && reinterpret_cast<uintptr_t>(w.data) % q8_align(w.type) == 0 &&
                               w.row_bytes % q8_align(w.type) == 0);
  if (need == 0 || !aligned || !ws.d_ptr || ws.bytes < need) return 0;
  return 1 + (gpu ? gpu_layout_chunk(w.type) : 0);  // the lane permutation of the rounded activations
}

namespace {

// The int8 activations' place in ws (gemv_act_key != 0): codes, then scales, then 16-sums.
ActRounding gemv_rounding(const WeightView& w, int n_cols, Workspace ws) {
  const size_t n = size_t(n_cols) * size_t(w.n_in);
  char* base = static_cast<char*>(ws.d_ptr);
  ActRounding r;
  r.q = reinterpret_cast<int8_t*>(base);
  r.d = reinterpret_cast<float*>(base + align_up(n));
  r.s16 = reinterpret_cast<int*>(base + align_up(n) + align_up(n / 32 * 4));
  r.perm_chunk = is_gpu_layout(w) ? gpu_layout_chunk(w.type) : 0;
  r.key = gemv_act_key(w, n_cols, ws);
  return r;
}

}  // namespace

ActRounding act_rounding(const WeightView& w, int n_cols, Workspace ws) {
  if (n_cols < 1 || n_cols > kMaxGemvCols || gemv_act_key(w, n_cols, ws) == 0) return {};
  return gemv_rounding(w, n_cols, ws);
}

Status round_act(const float* d_x, int64_t n, const ActRounding& r, Stream s) {
  if (!d_x || !r.q) return Status::error("round_act: null activations or no rounding");
  if (n <= 0 || n % 32 != 0) return Status::error("round_act: bad length {}", n);
  detail::launch_quantize_act_q8(d_x, n, r.q, r.d, r.s16, r.perm_chunk, cudaStream_t(s));
  return launch_status("round_act");
}

Status gemv(const WeightView& w, const float* d_x, int n_cols, float* d_y, Workspace ws, Stream s, bool reuse_act) {
  const bool gpu = is_gpu_layout(w);
  if (gemv_act_key(w, n_cols, ws) == 0) return gemv(w, d_x, n_cols, d_y, s);
  // The decode hot path (tens of calls per token): the operation's name is only formatted for an
  // error, so that a call costs the two launches and little else on the host.
  const auto op = [&] { return op_name(gpu ? "gemv_gpu" : "gemv_q8", w); };
  if (const Status v = validate_weights_fast(w); !v) return validate_weights(w, op());
  if (n_cols < 1 || n_cols > max_gemv_cols(w))
    return Status::error("{}: n_cols {} outside 1..{}", op(), n_cols, max_gemv_cols(w));
  if (!d_x || !d_y) return Status::error("{}: null activation or output pointer", op());
  const cudaStream_t st = cudaStream_t(s);
  const ActRounding r = gemv_rounding(w, n_cols, ws);
  if (!reuse_act) {
    detail::launch_quantize_act_q8(d_x, int64_t(n_cols) * w.n_in, r.q, r.d, r.s16, r.perm_chunk, st);
    STRATA_TRY(launch_status_lazy([&] { return op() + ": quantise activations"; }));
  }
  if (gpu) {
    if (!detail::launch_gemv_gpu(w, detail::ActGpu{r.q, r.d, r.s16}, n_cols, d_y, st))
      return Status::error("{}: no CUDA kernel for this type", op());
    return launch_status_lazy(op);
  }
  const detail::ActQ8 x{r.q, r.d, r.s16};
  if (!detail::launch_gemv_q8_legacy(w, x, n_cols, d_y, st) && !detail::launch_gemv_q8_k(w, x, n_cols, d_y, st) &&
      !detail::launch_gemv_q8_iq(w, x, n_cols, d_y, st))
    return Status::error("{}: no CUDA kernel for this type", op());
  return launch_status_lazy(op);
}

Status matmul(const WeightView& w, const float* d_x, int n_cols, float* d_y, Workspace ws, Stream s, bool reuse_act) {
  // Up to 16 columns (the engine's kMaxExactRows): prefill chunks of 17..64 rows keep the f16 GEMM's
  // accuracy (the int8 rounding of the activations fails the testdata models' prefill logit bound).
  // Callers that want the 64-column GEMV (tree verification, M12) call gemv() directly.
  if (n_cols >= 1 && n_cols <= kMaxGemvCols) return gemv(w, d_x, n_cols, d_y, ws, s, reuse_act);
  return gemm(w, d_x, n_cols, d_y, ws, s, reuse_act);
}

int matmul_act_key(const WeightView& w, int n_cols, Workspace ws) {
  if (n_cols >= 1 && n_cols <= kMaxGemvCols) return gemv_act_key(w, n_cols, ws);
  if (n_cols < 1 || !ws.d_ptr || ws.bytes < workspace_bytes_for_gemm(w, n_cols)) return 0;
  return kGemmActKey;
}

Status dequantize_rows(const WeightView& w, int64_t row0, int64_t n_rows, float* d_out, Stream s) {
  const std::string op = fmt::format("{} rows {}+{}", op_name("dequantize_rows", w), row0, n_rows);
  STRATA_TRY(validate_weights(w, op));
  if (row0 < 0 || n_rows < 0 || row0 + n_rows > w.n_out) return Status::error("{}: rows out of range", op);
  if (n_rows == 0) return Status::ok();
  if (!d_out) return Status::error("{}: null output pointer", op);
  const bool piece8 = is_float_type(w.type) && float_piece8(w, nullptr);
  const bool ok = is_gpu_layout(w) ? detail::launch_dequant_gpu_f32(w, row0, nullptr, n_rows, 1.0f, d_out, cudaStream_t(s))
                                   : detail::launch_dequant_f32(w, piece8, row0, n_rows, d_out, cudaStream_t(s));
  if (!ok) {
    return Status::error("{}: no CUDA kernel", op);
  }
  return launch_status(op);
}

Status get_rows(const WeightView& table, const int32_t* d_ids, int64_t n_tok, float scale, float* d_out, Stream s) {
  const std::string op = fmt::format("{} x{}", op_name("get_rows", table), n_tok);
  STRATA_TRY(validate_weights(table, op));
  if (n_tok < 0) return Status::error("{}: bad token count", op);
  if (n_tok == 0) return Status::ok();
  if (!d_ids || !d_out) return Status::error("{}: null pointer", op);
  // Ids are device data: trusted to be < n_out (the engine validates tokens before uploading them).
  const bool piece8 = is_float_type(table.type) && float_piece8(table, nullptr);
  const bool ok = is_gpu_layout(table)
                      ? detail::launch_dequant_gpu_f32(table, 0, d_ids, n_tok, scale, d_out, cudaStream_t(s))
                      : detail::launch_gather_f32(table, piece8, d_ids, n_tok, scale, d_out, cudaStream_t(s));
  if (!ok)
    return Status::error("{}: no CUDA kernel", op);
  return launch_status(op);
}

}  // namespace strata::kernels::cuda
