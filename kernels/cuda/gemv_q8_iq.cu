// The int8-activation GEMV for the i-quants (GGUF layout, 1..16 columns). CUDA only.
//
// Why not gemv_q8.cuh's kernel (still here as the STRATA_IQ_GEMV=generic comparison, over
// iq_decode.cuh's UnitIq): measured on the H200 it ran IQ3_XXS at ~21-24% of device read. Its
// limits for these types are load/store-unit wavefronts, not DRAM: each warp-wide grid lookup in
// global memory touches up to 8 L1 lines (8 lookups per 32 weights), and each row re-reads the
// activations (32 bytes per lane per sub-block, more than the 12 weight bytes). Here:
//   - the grid is copied once per CTA into shared memory (random 4- or 8-byte reads there cost a
//     few bank wavefronts, not 8 line wavefronts), and the resident CTAs loop over row groups so
//     the copy is paid once per CTA, not once per 4 warps' rows;
//   - a warp owns R rows and loads each column's activations once for all R (R = 4 for 1-2
//     columns, 2 up to 8, 1 for 16 where each decoded weight already serves 16 columns).
// Lanes stride over 32-element sub-blocks; the i-quants have no offsets and no code bias (kBias 0),
// so the activation sums are not read. Numerics as gemv_q8.cuh (exact integer products per 16,
// then float scales).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/gemv_q8.cuh"
#include "kernels/cuda/iq_decode.cuh"

namespace strata::kernels::cuda::detail {
namespace {

template <int NC>
constexpr int iq_rows() { return NC <= 2 ? 4 : (NC <= 8 ? 2 : 1); }

constexpr int kIqWarps = 4;

template <class T, int NC>
__global__ void __launch_bounds__(32 * kIqWarps) gemv_iq_kernel(const uint8_t* __restrict__ w, uint64_t row_bytes,
                                                                int64_t n_out, int64_t n_in, ActQ8 x, int n_cols,
                                                                float* __restrict__ y) {
  constexpr int R = iq_rows<NC>();
  constexpr int kSubs = T::kBlockElems / 32;
  using E = typename T::Entry;
  __shared__ E tab[T::kTableEntries > 0 ? T::kTableEntries : 1];
  if constexpr (T::kTableEntries > 0) {
    const E* g = T::global_table();
    for (int i = threadIdx.x; i < T::kTableEntries; i += 32 * kIqWarps) tab[i] = g[i];
    __syncthreads();
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n_sub = n_in / 32;
  const int64_t n_groups = (n_out + kIqWarps * R - 1) / (kIqWarps * R);
  for (int64_t grp = blockIdx.x; grp < n_groups; grp += gridDim.x) {
    const int64_t row0 = (grp * kIqWarps + warp) * R;
    if (row0 >= n_out) continue;  // the whole warp (no barrier below)
    const uint8_t* rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = w + uint64_t(min(row0 + r, n_out - 1)) * row_bytes;
    float acc[R][NC];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;
    for (int64_t sb = lane; sb < n_sub; sb += 32) {
      uint32_t q[R][8];
      float sc[R][2];
      const int64_t boff = (sb / kSubs) * T::kBlockBytes;
      const int ib = int(sb % kSubs);
#pragma unroll
      for (int r = 0; r < R; ++r)
        T::groups(rows[r] + boff, ib, -1, tab, [&](int l, uint32_t lo, uint32_t hi, float s) {
          q[r][2 * l] = lo;
          q[r][2 * l + 1] = hi;
          sc[r][l >> 1] = s;
        });
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        if (NC > 1 && c >= n_cols) break;
        const int4* xp = reinterpret_cast<const int4*>(x.q + c * n_in + sb * 32);
        const int4 xa = __ldg(xp), xb = __ldg(xp + 1);
        const float dx = __ldg(x.d + c * n_sub + sb);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          int s0 = __dp4a(int(q[r][0]), xa.x, 0);
          s0 = __dp4a(int(q[r][1]), xa.y, s0);
          s0 = __dp4a(int(q[r][2]), xa.z, s0);
          s0 = __dp4a(int(q[r][3]), xa.w, s0);
          int s1 = __dp4a(int(q[r][4]), xb.x, 0);
          s1 = __dp4a(int(q[r][5]), xb.y, s1);
          s1 = __dp4a(int(q[r][6]), xb.z, s1);
          s1 = __dp4a(int(q[r][7]), xb.w, s1);
          acc[r][c] = fmaf(dx, fmaf(sc[r][0], float(s0), sc[r][1] * float(s1)), acc[r][c]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        float v = acc[r][c];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0 && row0 + r < n_out && c < n_cols) y[int64_t(c) * n_out + row0 + r] = v;
      }
  }
}

// SMs of the current device, asked once per device.
int sm_count() {
  static int counts[16] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 16) return 132;
  if (counts[dev] == 0) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 132;
    counts[dev] = n;  // a benign race: every writer stores the same value
  }
  return counts[dev];
}

// As many CTAs as fit on the device at once (each then loops over row groups, so the grid copy is
// paid once per resident CTA), or fewer when there are fewer row groups. The occupancy is asked
// once per instantiation (the first device's answer; devices of one host are alike in practice).
template <class T, int NC>
void launch_iq_nc(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  constexpr int R = iq_rows<NC>();
  static const int per_sm = [] {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemv_iq_kernel<T, NC>, 32 * kIqWarps, 0) != cudaSuccess || n <= 0)
      n = 4;
    return n;
  }();
  const int64_t groups = (w.n_out + kIqWarps * R - 1) / (kIqWarps * R);
  const unsigned grid = unsigned(std::min<int64_t>(groups, int64_t(sm_count()) * per_sm));
  gemv_iq_kernel<T, NC><<<grid, 32 * kIqWarps, 0, s>>>(w.data, w.row_bytes, w.n_out, w.n_in, x, n_cols, d_y);
}

bool use_generic() {
  static const bool generic = [] {
    const char* e = std::getenv("STRATA_IQ_GEMV");
    return e && std::strcmp(e, "generic") == 0;
  }();
  return generic;
}

template <class T>
void launch_iq(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  if (use_generic()) {
    launch_gemv_q8<UnitIq<T, 1>>(w, x, n_cols, d_y, s);
    return;
  }
  with_column_tile(n_cols, [&](auto nc) { launch_iq_nc<T, decltype(nc)::value>(w, x, n_cols, d_y, s); });
}

}  // namespace

bool launch_gemv_q8_iq(const WeightView& w, const ActQ8& x, int n_cols, float* d_y, cudaStream_t s) {
  switch (w.type) {
    case GgmlType::IQ4_NL: launch_iq<IqIq4_NL>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ4_XS: launch_iq<IqIq4_XS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ3_XXS: launch_iq<IqIq3_XXS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ3_S: launch_iq<IqIq3_S>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_XXS: launch_iq<IqIq2_XXS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_XS: launch_iq<IqIq2_XS>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ2_S: launch_iq<IqIq2_S>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ1_S: launch_iq<IqIq1_S>(w, x, n_cols, d_y, s); return true;
    case GgmlType::IQ1_M: launch_iq<IqIq1_M>(w, x, n_cols, d_y, s); return true;
    default: return false;
  }
}

}  // namespace strata::kernels::cuda::detail
