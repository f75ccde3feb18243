// Dequantisation kernels: rows of W to f32 (bit-exact with the CPU decoders; dequantize_rows) and
// to f16 (GEMM tiles). One thread per piece (quant_decode.cuh).
#include "kernels/cuda/matmul_internal.h"
#include "kernels/cuda/iq_decode.cuh"
#include "kernels/cuda/quant_decode.cuh"

namespace strata::kernels::cuda::detail {
namespace {

// Output row r decodes W row ids[r] (a gather: embeddings) or, without ids, row0 + r; values are
// multiplied by `scale` (exactly: 1 keeps the decode bit-exact).
template <class Dec, typename Out>
__global__ void dequant_kernel(const uint8_t* __restrict__ w, uint64_t row_bytes, int64_t n_in, int64_t row0,
                               const int32_t* __restrict__ ids, int64_t n_rows, float scale, Out* __restrict__ out) {
  constexpr int P = Dec::kPiece;
  const int64_t pieces_per_row = n_in / P;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pieces_per_row * n_rows) return;
  const int64_t r = i / pieces_per_row, pc = i % pieces_per_row;
  constexpr int kPiecesPerBlock = Dec::kBlockElems / P;
  const int64_t src_row = ids ? int64_t(ids[r]) : row0 + r;
  const uint8_t* b = w + uint64_t(src_row) * row_bytes + (pc / kPiecesPerBlock) * Dec::kBlockBytes;
  float v[P];
  decode_piece<Dec>(b, int(pc % kPiecesPerBlock), v);
  Out* o = out + r * n_in + pc * P;
  // One 16-byte store per 8 halves (or two per 8 floats) where the output is aligned (always, for
  // the GEMM tiles): eight 2-byte stores per thread made the f16 tile write, and with it the
  // prefill matmul, store-bound.
  if constexpr (P == 8) {
    if ((reinterpret_cast<uintptr_t>(o) & 15) == 0) {
      if constexpr (sizeof(Out) == 2) {
        uint4 pk;
        uint32_t* w = reinterpret_cast<uint32_t*>(&pk);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const __half2 h2 = __halves2half2(__float2half_rn(__fmul_rn(v[2 * k], scale)),
                                            __float2half_rn(__fmul_rn(v[2 * k + 1], scale)));
          w[k] = *reinterpret_cast<const uint32_t*>(&h2);
        }
        *reinterpret_cast<uint4*>(o) = pk;
      } else {
        float4* o4 = reinterpret_cast<float4*>(o);
        o4[0] = make_float4(__fmul_rn(v[0], scale), __fmul_rn(v[1], scale), __fmul_rn(v[2], scale), __fmul_rn(v[3], scale));
        o4[1] = make_float4(__fmul_rn(v[4], scale), __fmul_rn(v[5], scale), __fmul_rn(v[6], scale), __fmul_rn(v[7], scale));
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if constexpr (sizeof(Out) == 4) {
      o[k] = __fmul_rn(v[k], scale);
    } else {
      o[k] = __float2half_rn(__fmul_rn(v[k], scale));
    }
  }
}

struct Rows {
  int64_t row0;
  const int32_t* ids;  // null: rows row0.. in order
  int64_t n;
  float scale;
};

template <class Dec, typename Out>
void launch(const WeightView& w, Rows r, Out* out, cudaStream_t s) {
  const int64_t n = r.n * (w.n_in / Dec::kPiece);
  constexpr int kThreads = 256;
  dequant_kernel<Dec, Out><<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, s>>>(w.data, w.row_bytes, w.n_in,
                                                                                       r.row0, r.ids, r.n, r.scale, out);
}

template <typename Out>
bool dispatch(const WeightView& w, bool piece8, Rows r, Out* out, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::Q4_0: launch<DecQ4_0>(w, r, out, s); return true;
    case GgmlType::Q4_1: launch<DecQ4_1>(w, r, out, s); return true;
    case GgmlType::Q5_0: launch<DecQ5_0>(w, r, out, s); return true;
    case GgmlType::Q5_1: launch<DecQ5_1>(w, r, out, s); return true;
    case GgmlType::Q8_0: launch<DecQ8_0>(w, r, out, s); return true;
    case GgmlType::Q2_K: launch<DecQ2_K>(w, r, out, s); return true;
    case GgmlType::Q3_K: launch<DecQ3_K>(w, r, out, s); return true;
    case GgmlType::Q4_K: launch<DecQ4_K>(w, r, out, s); return true;
    case GgmlType::Q5_K: launch<DecQ5_K>(w, r, out, s); return true;
    case GgmlType::Q6_K: launch<DecQ6_K>(w, r, out, s); return true;
    case GgmlType::IQ4_NL: launch<DecIq<IqIq4_NL>>(w, r, out, s); return true;
    case GgmlType::IQ4_XS: launch<DecIq<IqIq4_XS>>(w, r, out, s); return true;
    case GgmlType::IQ3_XXS: launch<DecIq<IqIq3_XXS>>(w, r, out, s); return true;
    case GgmlType::IQ3_S: launch<DecIq<IqIq3_S>>(w, r, out, s); return true;
    case GgmlType::IQ2_XXS: launch<DecIq<IqIq2_XXS>>(w, r, out, s); return true;
    case GgmlType::IQ2_XS: launch<DecIq<IqIq2_XS>>(w, r, out, s); return true;
    case GgmlType::IQ2_S: launch<DecIq<IqIq2_S>>(w, r, out, s); return true;
    case GgmlType::IQ1_S: launch<DecIq<IqIq1_S>>(w, r, out, s); return true;
    case GgmlType::IQ1_M: launch<DecIq<IqIq1_M>>(w, r, out, s); return true;
    case GgmlType::F32:
      piece8 ? launch<DecF32<8>>(w, r, out, s) : launch<DecF32<1>>(w, r, out, s);
      return true;
    case GgmlType::F16:
      piece8 ? launch<DecHalf<8, false>>(w, r, out, s) : launch<DecHalf<1, false>>(w, r, out, s);
      return true;
    case GgmlType::BF16:
      piece8 ? launch<DecHalf<8, true>>(w, r, out, s) : launch<DecHalf<1, true>>(w, r, out, s);
      return true;
    default: return false;
  }
}

}  // namespace

bool launch_dequant_f32(const WeightView& w, bool piece8, int64_t row0, int64_t n_rows, float* d_out, cudaStream_t s) {
  return dispatch(w, piece8, Rows{row0, nullptr, n_rows, 1.0f}, d_out, s);
}
bool launch_dequant_f16(const WeightView& w, bool piece8, int64_t row0, int64_t n_rows, void* d_out, cudaStream_t s) {
  return dispatch(w, piece8, Rows{row0, nullptr, n_rows, 1.0f}, static_cast<__half*>(d_out), s);
}
bool launch_gather_f32(const WeightView& w, bool piece8, const int32_t* d_ids, int64_t n_rows, float scale,
                       float* d_out, cudaStream_t s) {
  return dispatch(w, piece8, Rows{0, d_ids, n_rows, scale}, d_out, s);
}

}  // namespace strata::kernels::cuda::detail
