// The FFN's gate and up matrices of one column in one kernel, with the gated activation and the
// down matrix's int8 rounding on the way out (act_round.h gated_gemv). Why: a decode step ran them
// as gate GEMV || up GEMV (two streams) -> gated_act_round, i.e. one more kernel boundary per layer
// on the critical path, two launches of ~2700 CTAs for a 27B each with its own ramp and tail, and
// every warp loading the same activations twice. Here a CTA takes the same 8 rows of both matrices
// (the ways to share it: gated_gemv_variant below).
//
// Measured slower than the separate kernels in every form, so the engine leaves it off
// (STRATA_GATED_GEMV=1 turns it on): H100, 27B Q3_K_M resident, bench decode, same binary,
// alternated: separate 132.4 tok/s; split 117.4-119.1; pair 2 ahead 125.4-126.0; pair 3 ahead
// 126.9-127.1. ncu: a pair launch 51-53 us for both matrices (0.52 issued warps per scheduler, 1.2
// eligible), a separate ring kernel 25.7 us (0.71, 2.06), a split launch 61.9 us. So it is slower
// per byte even alone, and the kernel boundary it removes does not pay for that.
//
// Same bits as the three ops: per matrix the arithmetic and order of gemv_gpu_kernel (gemv_gpu.cuh
// gemv_tile_add, W warps per CTA as gemv_warps picks for the shape, partials summed in warp order),
// the activation by the same device function as the element-wise kernel (gated_act.cuh), and the
// rounding by round_store4 on the same floats. The rounding needs whole 32-element blocks, i.e. 4
// CTAs' rows: each CTA publishes its 8 outputs (store, __threadfence, then a per-block counter),
// and the block's last CTA rounds the 32 floats and resets the counter (the attention kernel's
// "last block done", attention_decode.cu).
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "kernels/cuda/act_round.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/gated_act.cuh"
#include "kernels/cuda/gemv_gpu_launch.cuh"
#include "kernels/cuda/gemv_tuning.h"

namespace strata::kernels::cuda {
namespace {
// STRATA_GATED_VARIANT sets the initial value (gemv_tuning.h set_gated_gemv_variant).
std::atomic<int> g_gated_variant{[] {
  const char* env = std::getenv("STRATA_GATED_VARIANT");
  return env ? std::atoi(env) : 2;
}()};
int gated_gemv_variant() { return g_gated_variant.load(std::memory_order_relaxed); }
}  // namespace
void set_gated_gemv_variant(int v) { g_gated_variant.store(v >= 0 && v <= 2 ? v : 2); }

namespace detail {
namespace {

// One chunk of gate and of up for column 0: gemv_tile_add's terms for each reader, the activations
// loaded once.
template <class D>
__device__ __forceinline__ void gemv_tile_add_pair(D& ra, D& rb, const ActGpu& xc, int64_t n_in, int t, float& acc_a,
                                                   float& acc_b) {
  constexpr int S = D::kSubs;
  uint32_t xw[S][2];
  float dx[2];
  int sx[4] = {0, 0, 0, 0};
  load_act<D>(xc, 0, n_in, 0, t, xw, dx, sx);
  const auto add = [&](D& r, float& acc) {
    if constexpr (!D::kLaneScales) r.finish();
    uint32_t b[S][2];
#pragma unroll
    for (int j = 0; j < S; ++j) b[j][0] = r.codes(j, 0), b[j][1] = r.codes(j, 1);
    const OwnScales<D> o(r, t);
    float v = lane_term<D>(r, o, b, xw, dx, sx);
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
    acc = __fadd_rn(acc, v);
  };
  add(ra, acc_a);
  add(rb, acc_b);
}

// Two ways to share a CTA between the matrices (gated_gemv_variant):
// - split (kSplit): 2W warps, the first W on gate's chunks and the others on up's, each warp as in
//   gemv_gpu_async_kernel (R tiles ahead); a CTA lives as long as one of the separate kernels'.
// - pair: W warps, each on both matrices' tiles of its chunks (R tile pairs ahead), the activations
//   loaded once per chunk for both; a CTA does twice the separate kernels' work.
template <class D, int W, int R, bool kGelu, bool kSplit>
__global__ void __launch_bounds__((kSplit ? 2 : 1) * W * 32, (kSplit ? 2 : 4) * 8 / W)
    gemv_gated_kernel(const uint8_t* __restrict__ wg, const uint8_t* __restrict__ wu, int64_t n_in, int64_t n_out,
                      ActGpu x, float* __restrict__ out, ActRounding next, unsigned* __restrict__ counters, bool pdl) {
  static_assert(!HasTable<D>::value && D::kTile % 16 == 0 && D::kSubs == 8 && R >= 1);
  constexpr int kMats = kSplit ? 1 : 2;  // matrices per warp
  extern __shared__ __align__(16) uint8_t gated_ring[];  // [warps][R][kMats][kTile]
  auto ring = reinterpret_cast<uint8_t (*)[R][kMats][D::kTile]>(gated_ring);
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int wid = threadIdx.x >> 5, warp = kSplit ? wid % W : wid;  // warp: its place in the split-K
  const bool on_up = kSplit && wid >= W;
  const int64_t n_chunks = n_in / D::kChunk, G = blockIdx.x;
  const int n_mine = warp < n_chunks ? int((n_chunks - warp + W - 1) / W) : 0;
  const uint64_t first = uint64_t(G) * uint64_t(n_chunks) * D::kTile + uint64_t(warp) * D::kTile;
  const uint8_t* w0 = on_up ? wu : wg;
  // Tile (pair) k of this warp (chunk warp + k W) into slot k % R; one commit group each, empty
  // past the last, so that wait_group<R - 1> always means "tile k has landed".
  auto issue = [&](int k) {
    if (k < n_mine) {
      const uint64_t src = first + uint64_t(k) * W * D::kTile;
#pragma unroll
      for (int o = lane * 16; o < D::kTile; o += 32 * 16) {
        gemv_cp_async16(ring[wid][k % R][0] + o, w0 + src + o);
        if constexpr (!kSplit) gemv_cp_async16(ring[wid][k % R][kMats - 1] + o, wu + src + o);
      }
    }
    gemv_cp_async_commit();
  };
#pragma unroll
  for (int k = 0; k < R; ++k) issue(k);
  if (pdl) pdl_wait();
  float acc_a = 0.0f, acc_b = 0.0f;  // split: this warp's matrix in acc_a; pair: gate, up
  constexpr int S = D::kSubs;
  ActGpu xc{x.q + int64_t(warp) * D::kChunk, x.d + int64_t(warp) * S, x.s16 + int64_t(warp) * 2 * S};
  for (int k = 0; k < n_mine; ++k, xc.q += W * D::kChunk, xc.d += W * S, xc.s16 += W * 2 * S) {
    gemv_cp_async_wait<R - 1>();
    __syncwarp();  // every lane's copies of tile k have landed
    D ra;
    ra.load_raw(SmemTile{ring[wid][k % R][0]}, lane, g);
    if constexpr (kSplit) {
      float acc1[1] = {acc_a};
      gemv_tile_add<D, 1>(ra, xc, n_in, t, 1, acc1);
      acc_a = acc1[0];
    } else {
      D rb;
      rb.load_raw(SmemTile{ring[wid][k % R][kMats - 1]}, lane, g);
      gemv_tile_add_pair<D>(ra, rb, xc, n_in, t, acc_a, acc_b);
    }
    __syncwarp();  // every lane is done with slot k % R: refill it, R ahead
    issue(k + R);
  }
  // The down GEMV after this kernel is launched early (PDL) once every CTA has triggered: here,
  // when each CTA's loop is done (its weight loads may then fill this kernel's tail), rather than
  // at the start, where its CTAs could hold SM slots this kernel's later waves need. Measured: no
  // difference either way (H100, 27B: split 117.4 late vs 119.1 early, pair 3 ahead 127.0 vs 127.0).
  pdl_launch_dependents();
  // The warps' partials in warp order (gemv_store_rows' sums), then act(gate) * up.
  __shared__ float red[2][W][8];
  __shared__ bool rounds_block;
  if (t == 0) {
    if constexpr (kSplit) {
      red[on_up ? 1 : 0][warp][g] = acc_a;
    } else {
      red[0][warp][g] = acc_a, red[1][warp][g] = acc_b;
    }
  }
  __syncthreads();
  const int64_t row = G * 8 + threadIdx.x;
  if (threadIdx.x < 8 && row < n_out) {
    float vg = 0.0f, vu = 0.0f;
#pragma unroll
    for (int k = 0; k < W; ++k) vg = __fadd_rn(vg, red[0][k][threadIdx.x]), vu = __fadd_rn(vu, red[1][k][threadIdx.x]);
    out[row] = kGelu ? gelu_tanh_mul1(vg, vu) : silu_mul1(vg, vu);
    __threadfence();  // the row is visible before the counter below says so
  }
  if (!next.q) return;
  // n_out % 32 == 0 (gated_gemv checks): every 32-element block has 4 row groups.
  const int64_t blk = G >> 2;
  __syncthreads();
  if (threadIdx.x == 0) rounds_block = atomicAdd(&counters[blk], 1u) == 3u;
  __syncthreads();
  if (!rounds_block || wid != 0) return;
  __threadfence();
  const int64_t e = blk * 32 + 4 * (lane & 7);
  // L2 loads (ld.global.cg): the other CTAs' rows, never a stale L1 line.
  const float4 v = lane < 8 ? __ldcg(reinterpret_cast<const float4*>(out + e)) : make_float4(0.f, 0.f, 0.f, 0.f);
  round_store4(v, e, lane < 8, next);
  if (lane == 0) counters[blk] = 0u;  // for the next call (stream order: after this kernel)
}

template <class D, int W, int R, bool kGelu, bool kSplit>
void launch_gated(const WeightView& gate, const WeightView& up, const ActGpu& x, float* out, const ActRounding& next,
                  unsigned* counters, cudaStream_t s) {
  constexpr auto kernel = gemv_gated_kernel<D, W, R, kGelu, kSplit>;
  constexpr int kBytes = 2 * W * R * D::kTile;  // split: 2W warps x 1 tile; pair: W warps x 2 tiles
  allow_dynamic_smem<kernel, kBytes>();
  launch_kernel_smem(kernel, unsigned((gate.n_out + 7) / 8), (kSplit ? 2 : 1) * W * 32, kBytes, s, gate.data, up.data,
                     gate.n_in, gate.n_out, x, out, next, counters, gpu_gemv_pdl());
}

template <class D, int W, bool kGelu>
void launch_gated_variant(int variant, const WeightView& gate, const WeightView& up, const ActGpu& x, float* out,
                          const ActRounding& next, unsigned* counters, cudaStream_t s) {
  switch (variant) {
    case 1: return launch_gated<D, W, 2, kGelu, false>(gate, up, x, out, next, counters, s);
    case 2: return launch_gated<D, W, 3, kGelu, false>(gate, up, x, out, next, counters, s);
    default: return launch_gated<D, W, 4, kGelu, true>(gate, up, x, out, next, counters, s);
  }
}

// Shared memory one CTA of a variant takes (launch_gated's kBytes).
template <class D>
int gated_smem_bytes(int variant, int w) {
  return 2 * w * (variant == 1 ? 2 : variant == 2 ? 3 : 4) * D::kTile;
}
// The variant to run: the chosen one where its ring fits the device's shared memory, else the
// smallest (a 16-warp q5_K split needs 180 KB: an sm_86 CTA gets at most 99 KB); -1 where none fits.
template <class D>
int gated_variant_that_fits(int w) {
  const int limit = smem_per_block_optin(), v = gated_gemv_variant();
  if (gated_smem_bytes<D>(v, w) <= limit) return v;
  return gated_smem_bytes<D>(1, w) <= limit ? 1 : -1;
}
int gated_variant_for(const WeightView& gate) {
  switch (gate.type) {
    case GgmlType::Q3_K: return gated_variant_that_fits<GpuQ3K>(gemv_warps(gate, GpuQ3K::kChunk));
    case GgmlType::Q4_K: return gated_variant_that_fits<GpuQ4K>(gemv_warps(gate, GpuQ4K::kChunk));
    case GgmlType::Q5_K: return gated_variant_that_fits<GpuQ5K>(gemv_warps(gate, GpuQ5K::kChunk));
    default: return -1;
  }
}

template <class D>
void launch_gated_type(bool gelu, const WeightView& gate, const WeightView& up, const ActGpu& x, float* out,
                       const ActRounding& next, unsigned* counters, cudaStream_t s) {
  // The split of the separate GEMV (gemv_warps: a function of the shape), so the same sums.
  const bool w16 = gemv_warps(gate, D::kChunk) == 16;
  const int v = gated_variant_that_fits<D>(w16 ? 16 : 8);
  if (gelu) {
    w16 ? launch_gated_variant<D, 16, true>(v, gate, up, x, out, next, counters, s)
        : launch_gated_variant<D, 8, true>(v, gate, up, x, out, next, counters, s);
  } else {
    w16 ? launch_gated_variant<D, 16, false>(v, gate, up, x, out, next, counters, s)
        : launch_gated_variant<D, 8, false>(v, gate, up, x, out, next, counters, s);
  }
}

}  // namespace
}  // namespace detail

bool gated_gemv_applies(const WeightView& gate, const WeightView& up, int n_cols) {
  const bool type_ok = gate.type == GgmlType::Q3_K || gate.type == GgmlType::Q4_K || gate.type == GgmlType::Q5_K;
  return n_cols == 1 && type_ok && gate.type == up.type && gate.layout == WeightLayout::kGpu &&
         up.layout == WeightLayout::kGpu && gate.n_in == up.n_in && gate.n_out == up.n_out && gate.n_in > 0 &&
         gate.n_in % 256 == 0 && gate.n_out > 0 && gate.n_out % 32 == 0 &&
         gate.n_out / 32 <= int64_t(kGatedCounterBytes / sizeof(unsigned)) && gate.data && up.data &&
         detail::gated_variant_for(gate) >= 0;
}

Status gated_gemv(bool gelu, const WeightView& gate, const WeightView& up, int n_cols, float* d_out, Workspace ws,
                  const ActRounding& next, unsigned* d_counters, Stream s) {
  if (!gated_gemv_applies(gate, up, n_cols))
    return Status::error("gated_gemv: gate {} x {} and up {} x {} ({} columns) are not a pair it computes", gate.n_in,
                         gate.n_out, up.n_in, up.n_out, n_cols);
  if (!d_out || !d_counters) return Status::error("gated_gemv: null output or counters");
  const ActRounding x = act_rounding(gate, n_cols, ws);
  if (!x.q) return Status::error("gated_gemv: the workspace holds no rounding of x for this matrix");
  if (next.q) {
    // The down matrix's rounding must not overlap x's (other CTAs still read x while it is written).
    const auto* lo = reinterpret_cast<const char*>(ws.d_ptr);
    const auto* at = reinterpret_cast<const char*>(next.q);
    if (at >= lo && at < lo + workspace_bytes_for_gemv(gate, n_cols))
      return Status::error("gated_gemv: the rounding of the output overlaps the rounding of x");
  }
  const detail::ActGpu ax{x.q, x.d, x.s16};
  const cudaStream_t st = cudaStream_t(s);
  switch (gate.type) {
    case GgmlType::Q3_K: detail::launch_gated_type<detail::GpuQ3K>(gelu, gate, up, ax, d_out, next, d_counters, st); break;
    case GgmlType::Q4_K: detail::launch_gated_type<detail::GpuQ4K>(gelu, gate, up, ax, d_out, next, d_counters, st); break;
    default: detail::launch_gated_type<detail::GpuQ5K>(gelu, gate, up, ax, d_out, next, d_counters, st); break;
  }
  return detail::launch_status(gelu ? "gated_gemv gelu" : "gated_gemv silu");
}

}  // namespace strata::kernels::cuda
